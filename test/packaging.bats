#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Packaging: `cmake --install` into a DESTDIR puts the binary, TLS module, man page
# and shell completions in place; the completions load and complete in bash, zsh and fish
# (including lock names from a live server, and quietly nothing from a dead or hung
# one); packaging recipes agree on the version; scripts pass shellcheck.
# shellcheck shell=bash

bats_require_minimum_version 1.5.0
load /usr/lib/bats/bats-support/load
load /usr/lib/bats/bats-assert/load
load skip

: "${BATS_TEST_TIMEOUT:=180}"
export BATS_TEST_TIMEOUT

RLOCK_SOURCE_DIR=${RLOCK_SOURCE_DIR:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
RLOCK_BUILD_DIR=${RLOCK_BUILD_DIR:-$RLOCK_SOURCE_DIR/build}
RLOCK=${RLOCK:-$RLOCK_BUILD_DIR/rlock}
COMP=$RLOCK_SOURCE_DIR/completions
export LC_ALL=C
unset RLOCK_URL REDIS_URL RLOCK_PREFIX RLOCK_CONFIG RLOCK_PASSWORD REDISCLI_AUTH RLOCK_TOKEN
export XDG_CONFIG_HOME=$BATS_FILE_TMPDIR/xdg-config

need() { require_tool "$1"; }
need_rlock() {
	[[ -x $RLOCK ]] || ci_skip "rlock is not built ($RLOCK)"
}

# A directory on PATH holding "rlock", so completions that run `rlock --list` find it.
rlock_on_path() {
	mkdir -p "$BATS_FILE_TMPDIR/bin"
	ln -sf "$RLOCK" "$BATS_FILE_TMPDIR/bin/rlock"
	PATH=$BATS_FILE_TMPDIR/bin:$PATH
}

# bash_complete FILE WORD...: the candidates bash's completion function offers for the
# command line WORD... (the last word is the one being completed), one per line.
bash_complete() {
	# shellcheck disable=SC2016
	bash -c 'source "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
		fn=$(complete -p rlock | sed -nE "s/.*-F ([^ ]+).*/\1/p")
		[[ -n $fn ]] || { echo "no complete -F for rlock" >&2; exit 1; }
		"$fn" rlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
		printf "%s\n" "${COMPREPLY[@]}"' _ "$@"
}

# redis_start: a private redis-server on a Unix socket; sets REDIS_SOCK and REDIS_PID.
redis_start() {
	need redis-server
	need redis-cli
	REDIS_SOCK=$BATS_FILE_TMPDIR/redis.sock
	redis-server --port 0 --unixsocket "$REDIS_SOCK" --save '' --appendonly no \
		--dir "$BATS_FILE_TMPDIR" >"$BATS_FILE_TMPDIR/redis.log" 2>&1 3>&- &
	REDIS_PID=$!
	local i
	for ((i = 0; i < 250; i++)); do
		[[ $(redis-cli -s "$REDIS_SOCK" ping 2>/dev/null) == PONG ]] && return 0
		sleep 0.02
	done
	fail "redis-server did not start: $(cat "$BATS_FILE_TMPDIR/redis.log")"
}

teardown() {
	if [[ -n ${HOLDER_PID:-} ]]; then
		kill "$HOLDER_PID" 2>/dev/null || true
		wait "$HOLDER_PID" 2>/dev/null || true
	fi
	if [[ -n ${REDIS_PID:-} ]]; then
		kill -CONT "$REDIS_PID" 2>/dev/null || true
		kill "$REDIS_PID" 2>/dev/null || true
		wait "$REDIS_PID" 2>/dev/null || true
	fi
}

# hold_lock NAME: run `rlock -k NAME -- sleep` in the background until --list shows it.
hold_lock() {
	"$RLOCK" -u "unix://$REDIS_SOCK" -k "$1" -- sleep 50 3>&- &
	HOLDER_PID=$!
	local i
	for ((i = 0; i < 250; i++)); do
		"$RLOCK" -u "unix://$REDIS_SOCK" --list 2>/dev/null | grep -q -- "$1" && return 0
		sleep 0.02
	done
	fail "rlock --list never showed lock $1"
}

@test "DESTDIR install puts binary, TLS module, man pages, docs and completions in place" {
	need_rlock
	[[ -f $RLOCK_BUILD_DIR/CMakeCache.txt ]] || ci_skip "no CMake build directory"
	local root=$BATS_FILE_TMPDIR/root cache zsh_dir libdir
	run env DESTDIR="$root" cmake --install "$RLOCK_BUILD_DIR" --prefix /usr
	assert_success
	cache=$RLOCK_BUILD_DIR/CMakeCache.txt
	zsh_dir=$(sed -n 's/^RLOCK_ZSH_COMPLETION_DIR:[A-Z]*=//p' "$cache")
	[[ $zsh_dir == /* ]] || zsh_dir=/usr/$zsh_dir
	libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$cache")
	[[ -n $libdir ]] || fail "no CMAKE_INSTALL_LIBDIR in $cache"
	[[ $libdir == /* ]] || libdir=/usr/$libdir
	[[ -x $root/usr/bin/rlock ]] || fail "no usr/bin/rlock"
	[[ -f $root$libdir/rlock/rlock-tls.so ]] || fail "no TLS module in $libdir/rlock"
	[[ -f $root/usr/share/man/man1/rlock.1 ]] || fail "no man page"
	[[ -f $root/usr/share/man/man5/rlock.conf.5 ]] || fail "no rlock.conf(5)"
	[[ -f $root/usr/share/man/man7/rlock-protocol.7 ]] || fail "no rlock-protocol(7)"
	if grep -q '^RLOCK_INSTALL_DOCS:BOOL=ON' "$cache"; then
		local d
		for d in README.md CONTRIBUTING.md docs/options.md docs/production.md docs/recipes.md; do
			[[ -f $root/usr/share/doc/rlock/$d ]] || fail "no usr/share/doc/rlock/$d"
		done
	fi
	[[ -f $root/usr/share/bash-completion/completions/rlock ]] || fail "no bash completion"
	[[ -f $root$zsh_dir/_rlock ]] || fail "no zsh completion in $zsh_dir"
	[[ -f $root/usr/share/fish/vendor_completions.d/rlock.fish ]] || fail "no fish completion"
	# Everything CMake says it installed is under DESTDIR.
	local f
	while IFS= read -r f; do
		[[ -e $root$f ]] || fail "install_manifest.txt names $f, which is not under DESTDIR"
	done <"$RLOCK_BUILD_DIR/install_manifest.txt"
	run "$root/usr/bin/rlock" --version
	assert_success
	assert_output --partial "rlock"
	# The installed binary does not link OpenSSL; the installed module provides it.
	run ldd "$root/usr/bin/rlock"
	refute_output --regexp 'libssl|libcrypto'
	RLOCK_TLS_MODULE=$root$libdir/rlock/rlock-tls.so run -0 "$root/usr/bin/rlock" --version
	assert_output --regexp '^rlock .*OpenSSL [0-9]'
	RLOCK_TLS_MODULE=$root/nowhere/rlock-tls.so run -0 "$root/usr/bin/rlock" --version
	assert_output --partial "TLS: unavailable (cannot load $root/nowhere/rlock-tls.so"
}

@test "completion directories can be overridden at configure time" {
	need cmake
	[[ -f $RLOCK_BUILD_DIR/CMakeCache.txt ]] || ci_skip "no CMake build directory"
	grep -q '^RLOCK_ZSH_COMPLETION_DIR:' "$RLOCK_BUILD_DIR/CMakeCache.txt" ||
		fail "RLOCK_ZSH_COMPLETION_DIR is not a cache variable"
	grep -q '^RLOCK_BASH_COMPLETION_DIR:' "$RLOCK_BUILD_DIR/CMakeCache.txt" ||
		fail "RLOCK_BASH_COMPLETION_DIR is not a cache variable"
	grep -q '^RLOCK_FISH_COMPLETION_DIR:' "$RLOCK_BUILD_DIR/CMakeCache.txt" ||
		fail "RLOCK_FISH_COMPLETION_DIR is not a cache variable"
}

@test "bash: rlock --no-w<TAB> completes to --no-wait" {
	run bash_complete "$COMP/rlock.bash" rlock --no-w
	assert_success
	assert_output "--no-wait"
	run bash -c 'source "$1"; complete -p rlock' _ "$COMP/rlock.bash"
	assert_output --partial "-F _rlock"
}

@test "bash: values for --ttl, --on-lost, --cacertdir and the wrapped command" {
	run bash_complete "$COMP/rlock.bash" rlock --ttl ""
	assert_output "$(printf '%s\n' 500ms 5s 30s 5m)"
	run bash_complete "$COMP/rlock.bash" rlock --ttl=3
	assert_output "30s"
	run bash_complete "$COMP/rlock.bash" rlock --on-lost te
	assert_output "term"
	mkdir -p "$BATS_TEST_TMPDIR/certs.d"
	: >"$BATS_TEST_TMPDIR/certs.pem"
	run bash_complete "$COMP/rlock.bash" rlock --cacertdir "$BATS_TEST_TMPDIR/cert"
	assert_output "$BATS_TEST_TMPDIR/certs.d"
	run bash_complete "$COMP/rlock.bash" rlock -k x -- bas
	assert_line "bash"
	# After the command starts, rlock's own options are no longer offered.
	run bash_complete "$COMP/rlock.bash" rlock -k x -- ls --no-w
	[[ $output != *--no-wait* ]] || fail "offered rlock's --no-wait for ls: $output"
}

@test "bash: the installed completion loads on demand through bash-completion" {
	[[ -r /usr/share/bash-completion/bash_completion ]] || ci_skip "bash-completion is not installed"
	local dir=$BATS_TEST_TMPDIR/share/bash-completion/completions
	mkdir -p "$dir"
	cp "$COMP/rlock.bash" "$dir/rlock"
	# shellcheck disable=SC2016
	run bash -c 'source /usr/share/bash-completion/bash_completion
		XDG_DATA_DIRS=$1 __load_completion rlock && complete -p rlock' _ "$BATS_TEST_TMPDIR/share"
	assert_success
	assert_output --partial "-F _rlock"
}

@test "zsh: _rlock loads with compinit, sourced and from fpath" {
	need zsh
	run zsh -fc 'autoload -U compinit; compinit -u -d "$1/zcd"; source "$2"; print -r -- $_comps[rlock]' \
		_ "$BATS_TEST_TMPDIR" "$COMP/_rlock"
	assert_success
	assert_output "_rlock"
	run zsh -fc 'fpath=("$2" $fpath); autoload -U compinit; compinit -u -d "$1/zcd2"; print -r -- $_comps[rlock]' \
		_ "$BATS_TEST_TMPDIR" "$COMP"
	assert_success
	assert_output "_rlock"
}

@test "fish: rlock.fish parses and completes --no-w to --no-wait" {
	need fish
	run fish -n "$COMP/rlock.fish"
	assert_success
	# shellcheck disable=SC2016
	run fish -c 'source $argv[1]; complete -C "rlock --no-w"' "$COMP/rlock.fish"
	assert_success
	assert_output --regexp '^--no-wait'
	# shellcheck disable=SC2016
	run fish -c 'source $argv[1]; complete -C "rlock --on-lost "' "$COMP/rlock.fish"
	assert_line --regexp '^term'
}

@test "lock names complete from the server in bash, zsh and fish" {
	need_rlock
	redis_start
	rlock_on_path
	hold_lock deploy-prod
	local url=unix://$REDIS_SOCK
	run bash_complete "$COMP/rlock.bash" rlock -u "$url" -k dep
	assert_success
	assert_output "deploy-prod"
	require_tool fish # (the bash part above has run)
	# shellcheck disable=SC2016
	run fish -c 'source $argv[1]; complete -C "rlock -u $argv[2] -k dep"' \
		"$COMP/rlock.fish" "$url"
	assert_success
	assert_output --regexp '^deploy-prod'
}

@test "lock names: quietly nothing, within about a second, from a dead or hung server" {
	need_rlock
	need timeout
	rlock_on_path
	local t0
	# Nobody listens on this socket.
	run --separate-stderr bash_complete "$COMP/rlock.bash" rlock \
		-u "unix://$BATS_TEST_TMPDIR/nobody.sock" -k ""
	assert_success
	assert_output ""
	# shellcheck disable=SC2154 # set by run --separate-stderr
	assert_equal "$stderr" ""
	# A server that accepts connections but never answers (stopped). rlock's own
	# deadlines made long (30 s): the completion's bound, not theirs (the default 2 s,
	# in whole $SECONDS, passed as 2 or 3 without it), must end it
	redis_start
	kill -STOP "$REDIS_PID"
	printf 'io-timeout = 30s\nconnect-timeout = 30s\n' >"$BATS_TEST_TMPDIR/slow.conf"
	t0=${EPOCHREALTIME/[.,]/}
	RLOCK_CONFIG=$BATS_TEST_TMPDIR/slow.conf run --separate-stderr bash_complete "$COMP/rlock.bash" rlock \
		-u "unix://$REDIS_SOCK" -k ""
	local ms=$(((${EPOCHREALTIME/[.,]/} - t0) / 1000))
	assert_success
	assert_output ""
	assert_equal "$stderr" ""
	((ms < 10000)) || fail "completion took $ms ms against a hung server"
}

@test "packaging recipes all carry the project version" {
	local v f
	v=$(sed -nE 's/^project\(rlock VERSION ([0-9.]+).*/\1/p' "$RLOCK_SOURCE_DIR/CMakeLists.txt")
	[[ -n $v ]] || fail "no version in CMakeLists.txt"
	f=$RLOCK_SOURCE_DIR/packaging
	grep -q "^rlock (${v}-" "$f/debian/changelog" || fail "debian/changelog is not at $v"
	grep -qE "^Version:[[:space:]]+${v}$" "$f/rpm/rlock.spec" || fail "rlock.spec is not at $v"
	grep -qx "pkgver=${v}" "$f/arch/PKGBUILD" || fail "PKGBUILD is not at $v"
	grep -qx "pkgver=${v}" "$f/alpine/APKBUILD" || fail "APKBUILD is not at $v"
	grep -q "rlock-${v}.tar.gz" "$f/homebrew/rlock.rb" || fail "rlock.rb is not at $v"
	grep -q "^## \[${v}\]" "$RLOCK_SOURCE_DIR/CHANGELOG.md" || fail "CHANGELOG.md has no $v"
}

@test "build-deb: the .deb's version is the project's with a build suffix; a newer commit's build upgrades an older one" {
	need dpkg
	local d=$BATS_TEST_TMPDIR v pv old new
	v=$(sed -nE 's/^project\(rlock VERSION ([0-9.]+).*/\1/p' "$RLOCK_SOURCE_DIR/CMakeLists.txt")
	# two tarballs as make-tarball makes them (git archive: every file has the commit's
	# time), an older and a newer commit of the same version
	mkdir -p "$d/rlock-$v/packaging"
	cp -a "$RLOCK_SOURCE_DIR/packaging/debian" "$d/rlock-$v/packaging/"
	tar -C "$d" --mtime='2026-01-02 03:04:05 UTC' -czf "$d/old.tar.gz" "rlock-$v"
	tar -C "$d" --mtime='2026-03-04 05:06:07 UTC' -czf "$d/new.tar.gz" "rlock-$v"
	old=$("$RLOCK_SOURCE_DIR/packaging/build-deb" -V -o "$d/out" "$d/old.tar.gz")
	new=$("$RLOCK_SOURCE_DIR/packaging/build-deb" -V -o "$d/out" "$d/new.tar.gz")
	[[ $old == "$v"-*+git20260102030405 ]] || fail "old build: $old"
	[[ $new == "$v"-*+git20260304050607 ]] || fail "new build: $new"
	dpkg --compare-versions "$new" gt "$old" || fail "$new does not upgrade $old"
	# and both upgrade the release of that version (-r: the changelog's own)
	pv=$("$RLOCK_SOURCE_DIR/packaging/build-deb" -r -V -o "$d/out" "$d/old.tar.gz")
	[[ $pv == "$v"-* && $pv != *git* ]] || fail "release: $pv"
	dpkg --compare-versions "$old" gt "$pv" || fail "$old does not upgrade $pv"
}

@test "rpm spec parses with rpmspec -P" {
	need rpmspec
	run rpmspec -P "$RLOCK_SOURCE_DIR/packaging/rpm/rlock.spec"
	assert_success
}

@test "shellcheck: completion, packaging scripts and these tests" {
	need shellcheck
	run shellcheck -s bash "$COMP/rlock.bash" \
		"$RLOCK_SOURCE_DIR/packaging/build-deb" "$RLOCK_SOURCE_DIR/packaging/make-tarball" \
		"$RLOCK_SOURCE_DIR/test/packaging.bats" "$RLOCK_SOURCE_DIR/test/docs.bats"
	assert_success
}
