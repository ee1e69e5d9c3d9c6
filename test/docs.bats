#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Documentation stays in step with the program. The option table of src/front/cli.c is the
# one source: `rlock --help` is built from it, rlock(1)'s OPTIONS are generated from
# --help (scripts/man-options; held here with --check), and docs/options.md's table and
# headings, and the bash, zsh and fish completions, must offer exactly the options of
# --help, with the same argument names (docs) and the same options taking a value
# (completions). The exit statuses of src/base/exitcodes.h are those of --help, rlock(1) and
# the README's table. The three man pages lint clean and render without warnings, and
# the links between the Markdown pages lead somewhere.
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
MANS=("$MAN" "$RLOCK_SOURCE_DIR/man/rlock.conf.5" "$RLOCK_SOURCE_DIR/man/rlock-protocol.7")
OPTIONS_MD=$RLOCK_SOURCE_DIR/docs/options.md
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
# Sorted "--name ARG" of every option of --help that takes a value (its long form).
# An option's line is indented 2 ("  -k, --key NAME") or 6 ("      --prefix STR").
help_args() {
	"$RLOCK" --help | grep -oE -- '^(  -[[:alnum:]], |      )--[a-z][a-z0-9-]* [^ ]+' |
		sed -E 's/^ +(-[[:alnum:]], )?//' | sort -u
}
# Sorted option names (long, and short where there is one) of the options that take a
# value, as --help shows them.
help_takes_value() {
	"$RLOCK" --help | grep -oE -- '^(  -[[:alnum:]], |      )--[a-z][a-z0-9-]* [^ ]+' |
		sed -E 's/^ +//; s/,//; s/ [^ -][^ ]*$//' | tr ' ' '\n' | sort -u
}
# Sorted exit statuses in --help's "Exit status:" table ("126/127" is two; "N" none).
help_exits() {
	"$RLOCK" --help | sed -n '/^Exit status:/,$p' | grep -oE '^  [0-9][0-9/]*' |
		tr '/' '\n' | tr -dc '0-9\n' | sort -u
}
# doc_table FILE HEADING: the first cells of the table right under HEADING in FILE (a
# path under the source tree).
doc_table() {
	awk -v h="$2" '$0 == h { on = 1; next } on && /^#/ { exit }
		on && /^\|/ && !/^\|---/ { print }' "$RLOCK_SOURCE_DIR/$1" |
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

# The options of an --help text on stdin, from its option column ("  -k, --key NAME":
# -k and --key), sorted.
help_column() {
	grep -oE -- '^(  -[[:alnum:]], |      )--[a-z][a-z0-9-]*' | tr -d ',' | tr ' ' '\n' |
		grep -E '^-' | sort -u
}
# The modes: the options whose --help says which options they read.
help_modes() {
	local o
	for o in $(help_long); do
		"$RLOCK" "$o" --help 2>/dev/null | grep -qF "The options $o reads" && echo "$o"
	done
}

@test "after a mode's option, each completion offers exactly the options that mode reads" {
	need_rlock
	need fish
	need zsh
	local m want got modes=0
	# flock's spellings of -n are offered beside it; the mode's own switch is on the line
	drop() { grep -vxE -e '--(nb|nonblock|nonblocking)' -e "$1" || true; }
	for m in $(help_modes); do
		modes=$((modes + 1))
		want=$("$RLOCK" "$m" --help | help_column | drop "$m")
		# shellcheck disable=SC2016
		got=$(bash -c 'source "$1"; COMP_WORDS=(rlock "$2" -); COMP_CWORD=2; _rlock
			printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP/rlock.bash" "$m" | sort -u | drop "$m")
		same_options "completions/rlock.bash (rlock $m -<TAB>) vs rlock $m --help" "$want" "$got"
		# shellcheck disable=SC2016
		got=$(fish -c 'source $argv[1]; complete -C "rlock $argv[2] -"' "$COMP/rlock.fish" "$m" |
			cut -f1 | sort -u | drop "$m")
		same_options "completions/rlock.fish (rlock $m -<TAB>) vs rlock $m --help" "$want" "$got"
		# zsh: the specs _rlock hands to _arguments (after its -s -S -C), by option name
		# shellcheck disable=SC2016
		got=$(zsh -f -c 'compdef() { : }
			_arguments() { local a; shift 3; for a in "$@"; do print -r -- "$a"; done }
			source $1; words=(rlock $2 ""); CURRENT=$#words; _rlock' _ "$COMP/_rlock" "$m" |
			sed -E 's/^\([^)]*\)//; s/^\*//; s/[[+=:].*//' | grep -E '^-' | sort -u | drop "$m")
		same_options "completions/_rlock (rlock $m -<TAB>) vs rlock $m --help" "$want" "$got"
	done
	((modes >= 9)) || fail "only $modes modes found in rlock --help: [$(help_modes)]"
}

@test "the completions' lists of what each mode refuses are those of scripts/completion-modes" {
	need_rlock
	run "$RLOCK_SOURCE_DIR/scripts/completion-modes" --check "$RLOCK"
	assert_success
}

@test "man pages: mandoc -Tlint -Werror is clean, -Wall finds nothing but missing Xr" {
	need mandoc
	local m
	for m in "${MANS[@]}"; do
		run mandoc -Tlint -Werror "$m"
		assert_success
		# STYLE messages about cross-references depend on which manuals this machine has.
		run bash -c 'mandoc -Tlint -Wall "$1" 2>&1 |
			grep -v -e "referenced manual not found" -e "mandoc.db"' _ "$m"
		assert_output ""
	done
}

@test "man pages: man --warnings renders each without warnings" {
	need man
	local m
	for m in "${MANS[@]}"; do
		run --separate-stderr man --warnings -l "$m"
		assert_success
		# shellcheck disable=SC2154 # set by run --separate-stderr
		[[ -z $stderr ]] || fail "man --warnings -l $m: $stderr"
		assert_output --partial "SEE ALSO"
	done
}

# has_sections PAGE SECTION...: fail naming the first .Sh the page lacks.
has_sections() {
	local page=$1 s
	shift
	for s in "$@"; do
		grep -qx "\.Sh $s" "$RLOCK_SOURCE_DIR/$page" || fail "$page has no $s section"
	done
}

@test "rlock(1)'s ENVIRONMENT names every variable rlock reads (getenv in src/)" {
	# Who else could have set it: a user can only judge what the page names.
	local env v unnamed=()
	env=$(sed -n '/^\.Sh ENVIRONMENT/,/^\.Sh FILES/p' "$MAN")
	while read -r v; do
		grep -qw "Ev $v" <<<"$env" || unnamed+=("$v")
	done < <(grep -rhoE '(getenv\("[A-Z_]+"\)|\.env = "[A-Z_]+"|vars\[\] = \{[^}]*\})' \
		"$RLOCK_SOURCE_DIR/src" | grep -oE '"[A-Z_]+"' | tr -d '"' | sort -u)
	((${#unnamed[@]} == 0)) || fail "read by rlock, not in rlock(1)'s ENVIRONMENT: ${unnamed[*]}"
}

@test "rlock.conf(5) names exactly the options a config file refuses, and every setting only the file has" {
	# Asked of the program: each option of --help written in a config file. A setting
	# the file takes fails later (a bad value, the closed port 1), never with this line.
	need_rlock
	local conf=$BATS_TEST_TMPDIR/c.conf page refused=() o want
	page=$(tr '\n' ' ' <"$RLOCK_SOURCE_DIR/man/rlock.conf.5")
	while read -r o; do
		printf '%s = 1\n' "${o#--}" >"$conf"
		chmod 600 "$conf"
		run -- timeout 10 "$RLOCK" --config "$conf" -u redis://127.0.0.1:1 -k docs -n -- true
		[[ $output != *"is not allowed in a config file"* ]] || refused+=("$o")
	done < <("$RLOCK" --help | grep -oE -- '^(  -[[:alnum:]], |      )--[a-z][a-z0-9-]*' |
		sed -E 's/^ +(-[[:alnum:]], )?//' | sort -u)
	want=$(sed -E 's/.*Options that name one run[^.]* \.Po (.*) \.Pc are not allowed in a configuration file.*/\1/' <<<"$page" |
		grep -oE -- '\\-[a-z][a-z0-9-]*' | sed 's/^\\/-/' | sort -u)
	same_options "rlock.conf(5)'s options not allowed in a file" "$(printf '%s\n' "${refused[@]}" | sort -u)" "$want"
	# The settings only a file has (hidden from --help): each named where the page says so.
	want=$(sed -nE 's/^ *OPT_HIDDEN\("([a-z-]+)", [^)]*F_CONFIG.*/\1/p' "$RLOCK_SOURCE_DIR/src/front/cli.c" | sort -u)
	[[ -n $want ]] || fail "no file-only setting found in src/front/cli.c"
	page=$(sed -E 's/.*The settings (.*) exist only in the file.*/\1/' <<<"$page" |
		grep -oE '\.Ql [a-z-]+' | sed 's/^\.Ql //' | sort -u)
	same_options "rlock.conf(5)'s settings that exist only in the file" "$want" "$page"
}

@test "man pages have the sections a user looks for, and name each other" {
	has_sections man/rlock.1 NAME SYNOPSIS DESCRIPTION OPTIONS ENVIRONMENT FILES \
		"EXIT STATUS" EXAMPLES "SEE ALSO"
	has_sections man/rlock.conf.5 NAME SYNOPSIS DESCRIPTION FILES EXAMPLES "SEE ALSO"
	has_sections man/rlock-protocol.7 NAME DESCRIPTION PROTOCOL SAFETY "SEE ALSO"
	local m
	for m in "rlock.conf 5" "rlock-protocol 7"; do
		sed -n '/^\.Sh SEE ALSO/,$p' "$MAN" | grep -q "^\.Xr $m" ||
			fail "rlock(1)'s SEE ALSO does not name $m"
	done
	for m in man/rlock.conf.5 man/rlock-protocol.7; do
		sed -n '/^\.Sh SEE ALSO/,$p' "$RLOCK_SOURCE_DIR/$m" | grep -q '^\.Xr rlock 1' ||
			fail "$m's SEE ALSO does not name rlock 1"
	done
}

@test "rlock(1)'s OPTIONS are --help's, as scripts/man-options draws them" {
	need_rlock
	run "$RLOCK_SOURCE_DIR/scripts/man-options" --check "$RLOCK"
	assert_success
}

@test "docs/options.md: one heading per option of --help, with --help's argument" {
	need_rlock
	local heads want
	# "### `-k, --key NAME`" -> "--key NAME"
	heads=$(sed -nE 's/^### `(-[[:alnum:]], )?(--[a-z][^`]*)`$/\2/p' "$OPTIONS_MD" | sort)
	[[ -n $heads ]] || fail "docs/options.md: no option headings"
	want=$({
		help_args
		comm -23 <(help_long) <(help_args | cut -d' ' -f1 | sort -u) |
			grep -vxE -- '--(nb|nonblock|nonblocking)'
	} | sort)
	same_options "docs/options.md headings (option and argument)" "$want" "$heads"
}

@test "docs/options.md's table names each option's argument as --help does" {
	need_rlock
	local cells spec name wrong=
	cells=$(doc_table docs/options.md "# Options")
	while read -r spec; do
		[[ $cells == *"$spec"* ]] || wrong+=" [$spec]"
	done < <(help_args)
	# and no option without a value is shown with one
	for name in $(comm -23 <(help_long) <(help_args | cut -d' ' -f1 | sort -u)); do
		grep -qE -- "$name [A-Z]" <<<"$cells" && wrong+=" [$name takes no value]"
	done
	[[ -z $wrong ]] || fail "docs/options.md's table, not as --help:$wrong"
}

@test "bash and zsh completions take a value for exactly the options that do in --help" {
	need_rlock
	local bash_opts zsh_opts
	# shellcheck disable=SC2016
	bash_opts=$(bash -c 'source "$1"; printf "%s\n" $_rlock_opts_with_arg' _ "$COMP/rlock.bash" |
		sort -u)
	same_options "completions/rlock.bash (_rlock_opts_with_arg)" "$(help_takes_value)" "$bash_opts"
	# zsh: --name= and -x+ in the _arguments specs
	zsh_opts=$(grep -oE -- "(--[a-z][a-z0-9-]*=|[{' ]-[[:alnum:]]\+)" "$COMP/_rlock" |
		tr -d "{' =+" | sort -u)
	same_options "completions/_rlock (options with =/+)" "$(help_takes_value)" "$zsh_opts"
}

@test "the fish completion takes a value for exactly the options that do in --help" {
	need_rlock
	need fish
	local fish_opts
	# the complete lines that take an argument (-x or -r)
	fish_opts=$(grep -E '^complete -c rlock .* -(x|r)( |$)' "$COMP/rlock.fish" |
		grep -oE -- ' -(l [a-z][a-z0-9-]*|s [[:alnum:]])' |
		sed -E 's/^ -l /--/; s/^ -s /-/' | sort -u)
	same_options "completions/rlock.fish (-x/-r)" "$(help_takes_value)" "$fish_opts"
	# and the list its command-line scanner skips values by, as fish builds it
	# shellcheck disable=SC2016
	fish_opts=$(fish -c 'source $argv[1]; printf "%s\n" $__rlock_opts_with_arg' "$COMP/rlock.fish" |
		sort -u)
	same_options "completions/rlock.fish (__rlock_opts_with_arg)" "$(help_takes_value)" "$fish_opts"
}

@test "Markdown pages: every relative link leads to a file, and every #anchor to a heading" {
	require_tool python3
	run python3 - "$RLOCK_SOURCE_DIR" <<'PY'
import os, re, sys
root = sys.argv[1]
pages = ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', 'SECURITY.md']
pages += ['docs/' + f for f in sorted(os.listdir(os.path.join(root, 'docs'))) if f.endswith('.md')]
def slugs(path):
    out, fence = set(), False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            fence = not fence
        m = None if fence else re.match(r'#+ (.*)', line)
        if m:
            s = re.sub(r'[^\w\- ]', '', m.group(1).strip().lower()).replace(' ', '-')
            out.add(s)
    return out
bad = []
for page in pages:
    path = os.path.join(root, page)
    if not os.path.exists(path):
        continue
    text = re.sub(r'```.*?```', '', open(path, encoding='utf-8').read(), flags=re.S)
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
        if re.match(r'[a-z]+:', target):
            continue
        file, _, anchor = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            bad.append(f'{page}: {target}: no such file')
        elif anchor and dest.endswith('.md') and anchor not in slugs(dest):
            bad.append(f'{page}: {target}: no such heading')
print('\n'.join(bad))
sys.exit(1 if bad else 0)
PY
	assert_success
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

@test "docs/options.md's table holds exactly the options of --help" {
	need_rlock
	local cells
	cells=$(doc_table docs/options.md "# Options")
	[[ -n $cells ]] || fail "docs/options.md: no table under '# Options'"
	same_options "docs/options.md option table, long options" "$(help_long)" \
		"$(grep -oE -- '(^|[^[:alnum:]-])--[a-z][a-z0-9-]*' <<<"$cells" | sed 's/^[^-]*//' | sort -u)"
	same_options "docs/options.md option table, short options" "$(help_short)" \
		"$(grep -oE -- '(^|[^[:alnum:]-])-[[:alnum:]]([^[:alnum:]-]|$)' <<<"$cells" |
			tr -dc -- '-[:alnum:]\n' | sort -u)"
}

@test "README's exit-status table holds exactly the exit statuses of --help" {
	need_rlock
	local cells
	cells=$(doc_table README.md "## Exit status")
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

@test "docs/production.md's --check sample counts the scripts rlock has (src/store/lock.c)" {
	local want said
	want=$(sed -n '/^} scripts\[S_COUNT\] = {/,/^};/p' "$RLOCK_SOURCE_DIR/src/store/lock.c" | grep -c '{lua_')
	said=$(sed -nE 's/.*scripts: the ([0-9]+) scripts of rlock load.*/\1/p' "$RLOCK_SOURCE_DIR/docs/production.md")
	((want > 0)) || fail "no scripts table in src/store/lock.c"
	[[ $said == "$want" ]] || fail "docs/production.md's --check sample says '$said' scripts; src/store/lock.c has $want"
}

@test "man pages render no nested quotes (Ql inside Ql or Pq)" {
	need mandoc
	local nested m
	# ASCII output quotes as `...'; an opening quote before the previous one closed
	# is a nested quote (the text is joined: a quote may span lines).
	for m in "${MANS[@]}"; do
		nested=$(mandoc -Tascii "$m" | col -b | tr '\n' ' ' | grep -o "\`[^']*\`" || true)
		[[ -z $nested ]] || fail "nested quotes in the rendered $m:"$'\n'"$nested"
	done
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

@test "every command the scripts call is in the documented ACL line and in --check's list of rights" {
	# A command a script calls that the ACL of docs/production.md lacks is refused
	# inside the script for a user set up by the book (ZRANK, HEXISTS, XDEL were).
	local used acl rights missing
	used=$(grep -ohE "redis\.p?call\('[A-Za-z]+'" "$RLOCK_SOURCE_DIR"/src/store/lua/*.lua |
		sed -E "s/.*\('//; s/'//" | tr '[:upper:]' '[:lower:]' | sort -u)
	[[ -n $used ]] || fail "no redis.call found in the scripts"
	acl=$(grep -m1 'ACL SETUSER locker' "$RLOCK_SOURCE_DIR/docs/production.md" | tr ' ' '\n' |
		sed -n 's/^+\([a-z]*\).*/\1/p' | sort -u)
	[[ -n $acl ]] || fail "no ACL line in docs/production.md"
	rights=$(sed -n 's/^ *{"\([a-z]*\)", [01], [01], {.*/\1/p' "$RLOCK_SOURCE_DIR/src/store/check.c" |
		sort -u)
	[[ -n $rights ]] || fail "no rights table in src/store/check.c"
	missing=$(comm -23 <(echo "$used") <(echo "$acl"))
	[[ -z $missing ]] || fail "called by the scripts, not in the documented ACL: $missing"
	missing=$(comm -23 <(echo "$used") <(echo "$rights"))
	[[ -z $missing ]] || fail "called by the scripts, not checked by --check: $missing"
}

@test "every --events kind (src/run/events.c) and --history event (src/store/lua) is documented" {
	local kinds evs k missing=()
	kinds=$(sed -n '/kind_names\[\] = {/,/^};/p' "$RLOCK_SOURCE_DIR/src/run/events.c" | grep -oE '"[a-z-]+"' | tr -d '"' | grep -vx renewed)
	# (renewed: counted for the metrics, never a line)
	[[ $(wc -w <<<"$kinds") -ge 12 ]] || fail "no kinds read from events.c: $kinds"
	for k in $kinds; do
		grep -q "\`$k\`" "$RLOCK_SOURCE_DIR/docs/operations.md" || missing+=("operations.md: $k")
		[[ $k == keeper-* ]] || sed -n '/^### `--events FILE`/,/^### /p' "$OPTIONS_MD" | grep -q "\*\*$k\*\*" ||
			missing+=("options.md --events: $k")
		[[ $k == keeper-* ]] || "$RLOCK" --help | grep -qw -- "$k" || missing+=("--help: $k")
	done
	# the history's ev values: 'ev', 'X' and the ends history_end writes ('X' or 'Y' too)
	evs=$(grep -ohE "'ev', *'[a-z]+'|history_end\([^,]+, *[a-z]+, *'[a-z]+'|'[a-z]+' or '[a-z]+'" \
		"$RLOCK_SOURCE_DIR"/src/store/lua/*.lua | grep -oE "'[a-z]{3,}'" | tr -d "'" | sort -u |
		grep -vx -e ev -e shared)
	[[ $(wc -w <<<"$evs") -ge 8 ]] || fail "no history events read: $evs"
	for k in $evs; do
		grep -A2 'prints one line per event' "$MAN" | grep -qw "$k" || missing+=("rlock.1: $k")
		grep -q "$k" "$OPTIONS_MD" || missing+=("options.md: $k")
	done
	((${#missing[@]} == 0)) || fail "undocumented: ${missing[*]}"
}
