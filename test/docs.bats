#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Documentation stays in step with the program: every option that `rlock --help`
# shows is in the man page, the README's option table and the bash, zsh and fish
# completions, and none of those offers an option that --help does not know; the exit
# statuses of src/base/exitcodes.h are those of --help, the man page and the README's table.
# The man page lints clean.
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
MAN=$RLOCK_SOURCE_DIR/man/rlock.1
COMP=$RLOCK_SOURCE_DIR/completions
export LC_ALL=C

# Sorted, unique long options (--name) in rlock --help; skips when rlock isn't built.
help_long() {
	"$RLOCK" --help | grep -oE -- '(^|[^[:alnum:]-])--[a-z][a-z0-9-]*' |
		sed 's/^[^-]*//' | sort -u
}
# Sorted short options (-x) from --help lines shaped like "  -k, --key NAME".
help_short() {
	"$RLOCK" --help | grep -oE -- '^[[:space:]]+-[[:alnum:]],' | tr -d ' \t,' | sort -u
}
# Sorted exit statuses in --help's "Exit status:" table ("126/127" is two; "N" none).
help_exits() {
	"$RLOCK" --help | sed -n '/^Exit status:/,$p' | grep -oE '^  [0-9][0-9/]*' |
		tr '/' '\n' | tr -dc '0-9\n' | sort -u
}
# readme_table HEADING: the first cells of the table right under HEADING in README.md.
readme_table() {
	awk -v h="$1" '$0 == h { on = 1; next } on && /^#/ { exit }
		on && /^\|/ && !/^\|---/ { print }' "$RLOCK_SOURCE_DIR/README.md" |
		awk -F'|' 'NR > 1 { print $2 }'
}
need_rlock() {
	[[ -x $RLOCK ]] || ci_skip "rlock is not built ($RLOCK): cannot read --help"
	"$RLOCK" --help >/dev/null 2>&1 || fail "rlock --help failed"
	[[ -n $(help_long) ]] || fail "rlock --help lists no long options"
}
need() { require_tool "$1"; }

# same_options WHAT EXPECTED ACTUAL: both sorted lists; fail naming the differences.
same_options() {
	local missing stale
	missing=$(comm -23 <(printf '%s\n' "$2") <(printf '%s\n' "$3") | tr '\n' ' ')
	stale=$(comm -13 <(printf '%s\n' "$2") <(printf '%s\n' "$3") | tr '\n' ' ')
	if [[ -n $missing || -n $stale ]]; then
		fail "$1: missing from it: [${missing}] -- not in --help: [${stale}]"
	fi
}

@test "man page documents exactly the options of --help" {
	need_rlock
	local man_long man_short
	# .Fl \-name (mdoc) and \-\-name (man(7) style), wherever they appear.
	man_long=$(grep -oE -- '(Fl |\\-)\\-[a-z][a-z0-9-]*' "$MAN" |
		sed -E 's/^(Fl |\\-)\\-/--/' | sort -u)
	same_options "man/rlock.1 long options" "$(help_long)" "$man_long"
	man_short=$(grep -oE -- '^\.It Fl [[:alnum:]] ' "$MAN" | awk '{print "-" $3}' | sort -u)
	same_options "man/rlock.1 short options" "$(help_short)" "$man_short"
}

@test "bash completion offers exactly the options of --help" {
	need_rlock
	local long all short
	# Ask the completion function itself, as bash would on TAB.
	# shellcheck disable=SC2016
	long=$(bash -c 'source "$1"; COMP_WORDS=(rlock --); COMP_CWORD=1; _rlock
		printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP/rlock.bash" | sort -u)
	same_options "completions/rlock.bash (rlock --<TAB>)" "$(help_long)" "$long"
	# shellcheck disable=SC2016
	all=$(bash -c 'source "$1"; COMP_WORDS=(rlock -); COMP_CWORD=1; _rlock
		printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP/rlock.bash" | sort -u)
	short=$(grep -E '^-[[:alnum:]]$' <<<"$all" || true)
	same_options "completions/rlock.bash (rlock -<TAB>)" "$(help_short)" "$short"
}

@test "zsh completion names exactly the options of --help" {
	need_rlock
	local long short
	# The _arguments specs, descriptions and the --list call all count.
	long=$(grep -oE -- '(^|[^[:alnum:]-])--[a-z][a-z0-9-]*' "$COMP/_rlock" |
		sed 's/^[^-]*//' | sort -u)
	same_options "completions/_rlock" "$(help_long)" "$long"
	short=$(grep -oE -- "[{' (]-[[:alnum:]][+,}]" "$COMP/_rlock" | tr -d "{}'( ,+" | sort -u)
	same_options "completions/_rlock short options" "$(help_short)" "$short"
}

@test "fish completion offers exactly the options of --help" {
	need_rlock
	need fish
	local long short
	# shellcheck disable=SC2016
	long=$(fish -c 'source $argv[1]; complete -C "rlock --"' "$COMP/rlock.fish" |
		cut -f1 | sed 's/=$//' | sort -u)
	same_options "completions/rlock.fish (rlock --<TAB>)" "$(help_long)" "$long"
	short=$(grep -oE -- ' -s [[:alnum:]] ' "$COMP/rlock.fish" | awk '{print "-" $2}' | sort -u)
	same_options "completions/rlock.fish short options" "$(help_short)" "$short"
}

@test "man page: mandoc -Tlint -Werror is clean, -Wall finds nothing but missing Xr" {
	need mandoc
	run mandoc -Tlint -Werror "$MAN"
	assert_success
	# STYLE messages about cross-references depend on which manuals this machine has.
	run bash -c 'mandoc -Tlint -Wall "$1" 2>&1 |
		grep -v -e "referenced manual not found" -e "mandoc.db"' _ "$MAN"
	assert_output ""
}

@test "man page: man --warnings renders it without warnings" {
	need man
	run --separate-stderr man --warnings -l "$MAN"
	assert_success
	# shellcheck disable=SC2154 # set by run --separate-stderr
	assert_equal "$stderr" ""
	assert_output --partial "EXIT STATUS"
}

@test "man page has the sections a user looks for" {
	local s
	for s in NAME SYNOPSIS DESCRIPTION ENVIRONMENT FILES "EXIT STATUS" PROTOCOL SAFETY \
		EXAMPLES "SEE ALSO"; do
		grep -qx "\.Sh $s" "$MAN" || fail "man/rlock.1 has no $s section"
	done
}

@test "--help prints exactly the exit statuses of src/base/exitcodes.h" {
	need_rlock
	local header
	[[ -r $RLOCK_SOURCE_DIR/src/base/exitcodes.h ]] || ci_skip "no src/base/exitcodes.h"
	# the rows of the table: X(code, NAME, ...)
	header=$(grep -oE '^[[:space:]]*X\([0-9]+,' "$RLOCK_SOURCE_DIR/src/base/exitcodes.h" |
		tr -dc '0-9\n' | sort -u)
	[[ -n $header ]] || fail "src/base/exitcodes.h: no X(code, ...) rows found"
	same_options "--help's exit statuses, against src/base/exitcodes.h" "$header" "$(help_exits)"
}

@test "man page lists every exit status of --help" {
	need_rlock
	local c
	for c in $(help_exits); do
		grep -qx "\.It $c" "$MAN" || fail "man/rlock.1 EXIT STATUS lacks $c"
	done
}

@test "README's option table holds exactly the options of --help" {
	need_rlock
	local cells
	cells=$(readme_table "### Options")
	[[ -n $cells ]] || fail "README.md: no table under '### Options'"
	same_options "README.md option table, long options" "$(help_long)" \
		"$(grep -oE -- '(^|[^[:alnum:]-])--[a-z][a-z0-9-]*' <<<"$cells" | sed 's/^[^-]*//' | sort -u)"
	same_options "README.md option table, short options" "$(help_short)" \
		"$(grep -oE -- '(^|[^[:alnum:]-])-[[:alnum:]]([^[:alnum:]-]|$)' <<<"$cells" |
			tr -dc -- '-[:alnum:]\n' | sort -u)"
}

@test "README's exit-status table holds exactly the exit statuses of --help" {
	need_rlock
	local cells
	cells=$(readme_table "## Exit status")
	[[ -n $cells ]] || fail "README.md: no table under '## Exit status'"
	# "126 / 127" is two statuses; "the command's own" is none
	same_options "README.md exit-status table" "$(help_exits)" \
		"$(grep -oE '[0-9]+' <<<"$cells" | sort -u)"
}

@test "--help fits in 80 columns" {
	need_rlock
	local long
	long=$("$RLOCK" --help | awk 'length > 80 { printf "%d: %s\n", length, $0 }')
	[[ -z $long ]] || fail "--help lines longer than 80 columns:"$'\n'"$long"
}

@test "--help's usage block and the man page's synopsis show every mode" {
	need_rlock
	local usage mode missing=
	usage=$("$RLOCK" --help | sed -n '1,/^$/p')
	for mode in status break reset list check acquire release held history; do
		[[ $usage == *"--$mode"* ]] || missing+=" --$mode (usage)"
		sed -n '/^\.Sh SYNOPSIS/,/^\.Sh /p' "$MAN" | grep -qx ".Fl \\\\-$mode" ||
			missing+=" --$mode (man SYNOPSIS)"
	done
	[[ -z $missing ]] || fail "not shown:$missing"
}

@test "README's --check sample counts the scripts rlock has (src/store/lock.c)" {
	local want said
	want=$(sed -n '/^} scripts\[S_COUNT\] = {/,/^};/p' "$RLOCK_SOURCE_DIR/src/store/lock.c" | grep -c '{lua_')
	said=$(sed -nE 's/.*scripts: the ([0-9]+) scripts of rlock load.*/\1/p' "$RLOCK_SOURCE_DIR/README.md")
	((want > 0)) || fail "no scripts table in src/store/lock.c"
	[[ $said == "$want" ]] || fail "README's --check sample says '$said' scripts; src/store/lock.c has $want"
}

@test "man page renders no nested quotes (Ql inside Ql or Pq)" {
	need mandoc
	local nested
	# ASCII output quotes as `...'; an opening quote before the previous one closed
	# is a nested quote (the text is joined: a quote may span lines).
	nested=$(mandoc -Tascii "$MAN" | col -b | tr '\n' ' ' | grep -o "\`[^']*\`" || true)
	[[ -z $nested ]] || fail "nested quotes in the rendered man page:"$'\n'"$nested"
}

@test "bash completion completes the command without '--' (rlock -k x sle<TAB>)" {
	local out
	# shellcheck disable=SC2016
	out=$(bash -c 'source "$1"; COMP_WORDS=(rlock -k x sle); COMP_CWORD=3; _rlock
		printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP/rlock.bash")
	grep -qx sleep <<<"$out" || fail "rlock -k x sle<TAB> offered: [$out]"
	# shellcheck disable=SC2016
	out=$(bash -c 'source "$1"; COMP_WORDS=(rlock -n -w 5s -k x --json sle); COMP_CWORD=7; _rlock
		printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP/rlock.bash")
	grep -qx sleep <<<"$out" || fail "after flags and values: [$out]"
	# still options where an option is being typed, and a value after -k
	# shellcheck disable=SC2016
	out=$(bash -c 'source "$1"; COMP_WORDS=(rlock -k x --no-w); COMP_CWORD=3; _rlock
		printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP/rlock.bash")
	assert_equal "$out" --no-wait
}
