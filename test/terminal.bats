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
	wait_until 10 test -e prompted
	printf 'bob\n' >&5
	wait_until 10 test -e readdone
	assert_equal "$(cat answer)" "hello bob"
	printf '\003' >&5
	wait_until 15 test -s exitcode
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
	wait_until 15 test -s after
	exec 5>&-
	assert_equal "$(cat after)" "got-back"
}
