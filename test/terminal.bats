#!/usr/bin/env bats
# rlock on a terminal (a real pty from script(1)): the command owns the terminal, so an
# interactive command can read it, and Ctrl-C — which the terminal sends to the whole
# foreground process group — reaches the command exactly once.

load helpers

setup() {
	common_setup
	# perl, not bash: bash folds two quick SIGINTs into one trap run, so it could
	# not tell one delivery from two; perl counts every delivered signal.
	cat >inter.sh <<'PL'
#!/usr/bin/perl
use strict;
use warnings;
use File::Basename;
chdir dirname($0) or exit 99;
$| = 1;
$SIG{INT} = sub { open my $f, '>>', 'sigs' or die; print $f "INT\n"; close $f; };
sub touch { open my $f, '>', $_[0] or die; close $f; }
touch('prompted');
print "name? ";
my $n = <STDIN>;
chomp $n;
open my $a, '>', 'answer' or die; print $a "hello $n\n"; close $a;
touch('readdone');
for (1 .. 500) { last if -s 'sigs'; select(undef, undef, undef, 0.02); }
# a second (duplicate) delivery would arrive within this window
select(undef, undef, undef, 0.05) for 1 .. 10;
exit 5;
PL
	chmod +x inter.sh
	mkfifo tty-in
}

@test "interactive command reads the terminal; Ctrl-C reaches it exactly once" {
	# clean_exec: bash starts background jobs with SIGINT ignored, which a command
	# inherits (and then cannot trap); a terminal session starts with defaults.
	(clean_exec script -qfec "$RLOCK -u $REDIS_URL -k tty -- $BATS_TEST_TMPDIR/inter.sh; echo rlock-exit=\$? > exitcode" \
		/dev/null) <tty-in >tty-out 2>&1 &
	track_pid $!
	exec 5>tty-in
	wait_until 30 test -e prompted
	printf 'bob\n' >&5
	wait_until 30 test -e readdone
	assert_equal "$(cat answer)" "hello bob"
	printf '\003' >&5
	wait_until 30 test -s exitcode
	exec 5>&-
	assert_equal "$(cat sigs)" "INT"
	assert_equal "$(cat exitcode)" "rlock-exit=5"
	key_absent 'rlock:{tty}'
}

@test "the terminal is given back to rlock's group after the command" {
	# After the command, a second command in the same shell must still be able to
	# read the terminal (rlock took the foreground back).
	(clean_exec script -qfec "$RLOCK -u $REDIS_URL -k tty -- true; read -r x; echo got-\$x > after" \
		/dev/null) <tty-in >tty-out 2>&1 &
	track_pid $!
	exec 5>tty-in
	printf 'back\n' >&5
	wait_until 30 test -s after
	exec 5>&-
	assert_equal "$(cat after)" "got-back"
}

# ttyread.sh: prompts on /dev/tty and reads the answer from it (as sudo, ssh and
# read -p </dev/tty do), whatever its stdin, stdout and stderr are.
make_ttyread() {
	cat >ttyread.sh <<'SH'
#!/bin/sh
cd "$(dirname "$0")" || exit 99
: >prompted
printf 'password? ' >/dev/tty
read -r x </dev/tty
echo "hello $x" >answer
SH
	chmod +x ttyread.sh
}

@test "a command that reads /dev/tty gets the terminal with stdin, stdout and stderr redirected (as under flock)" {
	make_ttyread
	(clean_exec script -qfec "$RLOCK -u $REDIS_URL -k devtty -- $BATS_TEST_TMPDIR/ttyread.sh </dev/null >/dev/null 2>&1; echo rlock-exit=\$? > exitcode" \
		/dev/null) <tty-in >tty-out 2>&1 &
	track_pid $!
	exec 5>tty-in
	wait_until 30 test -e prompted
	wait_until 30 grep -q 'password?' tty-out
	printf 'bob\n' >&5
	wait_until 30 test -s exitcode || fail "the command never read the terminal (stopped in a background group?): $(cat -v tty-out)"
	exec 5>&-
	assert_equal "$(cat answer)" "hello bob"
	assert_equal "$(cat exitcode)" "rlock-exit=0"
	key_absent 'rlock:{devtty}'
}

@test "a command started with & by a script (stdin /dev/null) does not take the terminal from the script" {
	# bash without job control runs `cmd &` in its own (foreground) group, stdin on
	# /dev/null: the command does not ask for the terminal, so the script keeps it.
	cat >bgscript.sh <<SH
#!/bin/bash
cd "$BATS_TEST_TMPDIR" || exit 99
$RLOCK -u $REDIS_URL -k bgamp -- sh -c ': >started; exec sleep 60' &
for _ in \$(seq 1500); do [[ -e started ]] && break; sleep 0.02; done
read -r x
echo "got-\$x" >after
kill \$!
wait
SH
	chmod +x bgscript.sh
	(clean_exec script -qfec "$BATS_TEST_TMPDIR/bgscript.sh" /dev/null) <tty-in >tty-out 2>&1 &
	track_pid $!
	exec 5>tty-in
	wait_until 30 test -e started
	printf 'back\n' >&5
	wait_until 30 test -s after || fail "the script lost the terminal: $(cat -v tty-out)"
	exec 5>&-
	assert_equal "$(cat after)" "got-back"
	wait_until 30 key_absent 'rlock:{bgamp}'
}

# cat_foreground: the `cat` run by rlock owns the terminal again (after fg).
cat_foreground() {
	local rpid cpid
	rpid=$(rcli HGET 'rlock:{tstp}:owner' pid)
	cpid=$(ps -o pid=,comm= --ppid "$rpid" 2>/dev/null | awk '$2 == "cat" {print $1}')
	[[ -n $cpid ]] || return 1
	[[ $(ps -o tpgid= -p "$cpid" | tr -d ' ') == "$(ps -o pgid= -p "$cpid" | tr -d ' ')" ]]
}

@test "Ctrl-Z stops the command and rlock with it (the shell gets control back); fg resumes" {
	(clean_exec script -qfec "bash --norc --noprofile -i" /dev/null) <tty-in >tty-out 2>&1 &
	track_pid $!
	exec 5>tty-in
	# One command per line: when a job stops, bash goes on with the rest of a `;` list.
	printf '%s\n' "$RLOCK -u $REDIS_URL -k tstp -- cat > catted" >&5
	wait_until 30 key_exists 'rlock:{tstp}'
	wait_until 30 cat_foreground
	printf 'one\n' >&5
	wait_until 30 grep -q one catted
	printf '\032' >&5 # Ctrl-Z
	wait_until 30 grep -q Stopped tty-out
	printf 'echo shell-back > back\n' >&5
	wait_until 30 test -e back # the shell has the terminal again
	key_exists 'rlock:{tstp}'  # suspended, not released
	printf 'fg\n' >&5
	wait_until 30 cat_foreground
	printf 'two\n' >&5
	wait_until 30 grep -q two catted
	printf '\004' >&5 # Ctrl-D: end of cat's input
	wait_until 30 key_absent 'rlock:{tstp}'
	printf 'echo rlock-exit=$? > exitcode\n' >&5 # $? of fg: the job's status
	wait_until 30 test -s exitcode
	printf 'exit\n' >&5
	exec 5>&-
	assert_equal "$(cat exitcode)" "rlock-exit=0"
	assert_equal "$(cat catted)" "$(printf 'one\ntwo')"
	key_absent 'rlock:{tstp}'
}
