# Skips that must not hide gaps on CI. Loaded by helpers.bash, and directly by the
# .bats files that do not use helpers.bash (docs, packaging).
#
# ci_skip REASON: skip the test here; with CI=true fail it instead. Use it for anything
# that is missing (a tool, the package, a kernel facility): on CI scripts/deps installs
# it, so a skip there would mean a test silently stopped testing.
# shellcheck shell=bash
ci_skip() {
	if [[ ${CI:-} == true ]]; then
		echo "# not skipped on CI (CI=true), failed instead: $*" >&2
		exit 1
	fi
	skip "$*"
}

# require_tool NAME...: each NAME is a command on PATH, or ci_skip.
require_tool() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || ci_skip "$t is not installed"
	done
}
