#!/usr/bin/env bats
# shellcheck disable=SC2016  # $-expressions are for the shells the tests start
# The Debian package as a user gets it (issue 4). On CI, scripts/test builds the .deb
# from this commit and installs it with dpkg -i before the last ctest run; this file
# then checks what `apt install ./rlock_*.deb` promises: the binary (and its TLS
# module), the man page, and completions that the three shells actually load from
# their system directories. It skips when the package is not installed (fails on CI).
# What else the machine has (an rlock that `cmake --install` put under /usr/local, a
# user's own completions under ~/.local or ~/.config) must not change a verdict: each
# test names the package's paths and keeps the user's and /usr/local's out of the search.

load helpers

package_installed() {
	dpkg-query -W -f='${Status}' rlock 2>/dev/null | grep -q 'install ok installed'
}

setup_file() {
	if package_installed; then
		common_setup_file
	fi
}

setup() {
	package_installed || ci_skip "the rlock package is not installed (scripts/test installs it on CI)"
	common_setup
	# The system directories only: no ~/.local/share, ~/.config, /usr/local/share.
	export XDG_DATA_HOME=$BATS_TEST_TMPDIR/data XDG_CONFIG_HOME=$BATS_TEST_TMPDIR/config
	export XDG_DATA_DIRS=/usr/share BASH_COMPLETION_USER_DIR=$BATS_TEST_TMPDIR/bash-completion
	export MANPATH=/usr/share/man
}

@test "installed rlock: --version names hiredis and OpenSSL (the TLS module loads)" {
	run -0 /usr/bin/rlock --version
	assert_regex "$output" '^rlock [0-9.]+ \(hiredis [0-9.]+, OpenSSL [0-9]'
	run -0 dpkg -L rlock
	assert_regex "$output" '/rlock/rlock-tls\.so'
}

@test "installed rlock takes and releases a lock on a real server" {
	run -0 /usr/bin/rlock -u "$REDIS_URL" -k pkg -- sh -c 'echo "fence $RLOCK_FENCE"'
	assert_output 'fence 1'
	key_absent 'rlock:{pkg}'
}

@test "man -w rlock finds the installed page, and it renders" {
	# MANPATH=/usr/share/man: a page under /usr/local (cmake --install) comes first on
	# man's own search path; the package's page is the one checked.
	run -0 man -w rlock
	assert_regex "$output" '^/usr/share/man/man1/rlock\.1'
	run -0 dpkg -S "$output"
	assert_regex "$output" '^rlock: '
	run -0 sh -c 'MANWIDTH=80 man rlock 2>&1 | grep -c "EXIT STATUS"'
}

@test "man finds rlock.conf(5) and rlock-protocol(7) from the package, and they render" {
	local page sec
	for page in rlock.conf:5 rlock-protocol:7; do
		sec=${page#*:}
		page=${page%:*}
		run -0 man -w "$sec" "$page"
		assert_regex "$output" "^/usr/share/man/man$sec/$page\.$sec"
		run -0 dpkg -S "$output"
		assert_regex "$output" '^rlock: '
		run -0 sh -c 'MANWIDTH=80 man "$1" "$2" 2>&1 | grep -c "SEE ALSO"' _ "$sec" "$page"
	done
}

@test "the package ships the documentation the README links to" {
	local d
	for d in README.md CONTRIBUTING.md docs/options.md docs/usage.md docs/production.md \
		docs/operations.md docs/scaling.md docs/recipes.md docs/guarantees.md \
		docs/compatibility.md; do
		[[ -f /usr/share/doc/rlock/$d || -f /usr/share/doc/rlock/$d.gz ]] ||
			fail "the package has no /usr/share/doc/rlock/$d"
	done
}

@test "bash: the system completion completes rlock --no-w<TAB> to --no-wait" {
	[[ -r /usr/share/bash-completion/bash_completion ]] || ci_skip "bash-completion not installed"
	run -0 bash -c '
		source /usr/share/bash-completion/bash_completion
		__load_completion rlock || exit 3
		COMP_WORDS=(rlock --no-w); COMP_CWORD=1; COMP_LINE="rlock --no-w"; COMP_POINT=${#COMP_LINE}
		fn=$(complete -p rlock | sed -nE "s/.*-F ([^ ]+).*/\1/p")
		shopt -s extdebug
		declare -F "$fn" >&2 # where it was defined
		"$fn" rlock --no-w rlock
		printf "%s\n" "${COMPREPLY[@]}"'
	assert_output --partial -- '--no-wait'
	assert_regex "$output" ' /usr/share/bash-completion/completions/rlock'
}

@test "zsh: the completion loads from Debian's vendor-completions" {
	require_tool zsh
	[[ -f /usr/share/zsh/vendor-completions/_rlock ]] || fail "no _rlock in vendor-completions"
	run -0 zsh -fc 'fpath=(/usr/share/zsh/vendor-completions $fpath); autoload -U compinit
		compinit -u -d "$1/zcd"; print -r -- $_comps[rlock]' _ "$BATS_TEST_TMPDIR"
	assert_output "_rlock"
}

@test "fish: the completion loads from vendor_completions.d" {
	require_tool fish
	[[ -f /usr/share/fish/vendor_completions.d/rlock.fish ]] ||
		fail "no rlock.fish in /usr/share/fish/vendor_completions.d"
	run -0 fish -c 'complete -C "rlock --no-w"'
	assert_output --partial -- '--no-wait'
}
