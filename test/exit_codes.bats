#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154  # quoted $: for the command rlock runs; bats sets $stderr
# Exit status (SPEC §3): the command's own, 128+N for a signal, 69, 75 / -E, 126, 127.
# Foreign locks set by a test live 10 minutes: each rlock run takes seconds under valgrind.

load helpers

@test "command's own status is passed through" {
	run -0 rlock -k e -- true
	run -1 rlock -k e -- false
	run -42 rlock -k e -- sh -c 'exit 42'
	run -255 rlock -k e -- sh -c 'exit 255'
	key_absent 'rlock:{e}'
}

@test "-c runs a shell command" {
	run -7 rlock -k e -c 'echo "hello $((6 * 7))"; exit 7'
	assert_output 'hello 42'
	key_absent 'rlock:{e}'
}

@test "stdout and stderr of the command pass through" {
	run -0 --separate-stderr rlock -k e -- sh -c 'echo out; echo err >&2'
	assert_output out
	assert_equal "$stderr" err
}

@test "command killed by a signal: 128+N" {
	run -143 rlock -k e -- sh -c 'kill -TERM $$'
	run -137 rlock -k e -- sh -c 'kill -KILL $$'
	run -134 rlock -k e -- sh -c 'kill -ABRT $$'
	key_absent 'rlock:{e}'
}

@test "command not found: 127, lock released" {
	run -127 rlock -k e -- /nonexistent/definitely-not-here
	run -127 rlock -k e -- definitely-not-a-command-rlock-test
	key_absent 'rlock:{e}'
}

@test "an exec that fails with ENOENT says what is missing, as bash and timeout(1) do: a path, a name on no PATH entry, a script's #! interpreter; 127" {
	run -127 --separate-stderr rlock -k e -- ./not-here
	assert_equal "$stderr" 'rlock: ./not-here: No such file or directory'
	run -127 --separate-stderr rlock -k e -- not-a-command-rlock-test
	assert_equal "$stderr" 'rlock: not-a-command-rlock-test: command not found'
	key_absent 'rlock:{e}'
	# the file is there (the old line said "command not found" of it). Not under
	# valgrind: its execve cannot recover from a script's missing interpreter (the
	# child dies, 101: "EXEC FAILED: I can't recover from execve() failing").
	[[ $RLOCK != *valgrind* ]] || return 0
	printf '#!/nonexistent/interp -x\necho ran\n' >badint
	chmod +x badint
	run -127 --separate-stderr rlock -k e -- ./badint
	assert_equal "$stderr" 'rlock: ./badint: bad interpreter /nonexistent/interp: No such file or directory'
	PATH=$PWD:$PATH run -127 --separate-stderr rlock -k e -- badint
	assert_equal "$stderr" 'rlock: badint: bad interpreter /nonexistent/interp: No such file or directory'
	# a #! line with a DOS line end: the interpreter the kernel looked for ends in \r
	# (bash shows ^M), never "/bin/sh", which is there
	printf '#!/bin/sh\r\necho ran\r\n' >crlf
	chmod +x crlf
	run -127 --separate-stderr rlock -k e -- ./crlf
	assert_equal "$stderr" 'rlock: ./crlf: bad interpreter /bin/sh\x0d: No such file or directory (its #! line ends in a carriage return: DOS line ends)'
	key_absent 'rlock:{e}'
}

@test "command not executable: 126, lock released" {
	printf '#!/bin/sh\necho should not run\n' >notexec
	chmod 644 notexec
	run -126 rlock -k e -- ./notexec
	refute_output --partial 'should not run'
	mkdir adir
	run -126 --separate-stderr rlock -k e -- ./adir
	assert_equal "$stderr" 'rlock: ./adir: Is a directory' # as bash says it
	key_absent 'rlock:{e}'
	# an executable script whose interpreter cannot be run: the interpreter is named,
	# as bash names it, not the script (which the user can see is executable)
	[[ $RLOCK != *valgrind* ]] || return 0 # (its execve: see the ENOENT test above)
	printf '#!%s\necho should not run\n' "$PWD/notexec" >badinterp
	chmod 755 badinterp
	run -126 --separate-stderr rlock -k e -- ./badinterp
	assert_equal "$stderr" "rlock: ./badinterp: bad interpreter $PWD/notexec: Permission denied"
	refute_output --partial 'should not run'
	key_absent 'rlock:{e}'
}

@test "redis unavailable (connection refused) with -n: 69, command not run" {
	local port
	port=$(dead_port)
	run -69 --separate-stderr rlock -n -u "redis://127.0.0.1:$port" -k e -- touch ran
	[[ ! -e ran ]]
	assert_regex "$stderr" '^rlock:'
}

@test "redis unavailable (missing unix socket) with -n: 69" {
	run -69 rlock -n -u "unix://$BATS_TEST_TMPDIR/no.sock" -k e -- touch ran
	[[ ! -e ran ]]
}

@test "redis unavailable via REDIS_URL with -w: 69 at the deadline" {
	local port
	port=$(dead_port)
	REDIS_URL="redis://127.0.0.1:$port" run -69 rlock -w 300ms -k e -- touch ran
	[[ ! -e ran ]]
}

@test "lock busy with -n: 75, command not run; -E changes the status" {
	rcli SET 'rlock:{e}' someone-else PX 600000
	run -75 rlock -n -k e -- touch ran
	[[ ! -e ran ]]
	run -3 rlock -n -E 3 -k e -- touch ran
	[[ ! -e ran ]]
	run -3 rlock -n --conflict-exit-code 3 -k e -- touch ran
	[[ ! -e ran ]]
	# the foreign lock is untouched
	assert_equal "$(rcli GET 'rlock:{e}')" someone-else
}

@test "-E 0: skip silently, exit 0, command not run" {
	rcli SET 'rlock:{e}' someone-else PX 600000
	run -0 --separate-stderr rlock -n -E 0 -k e -- touch ran
	[[ ! -e ran ]]
	assert_equal "$output" ""
	assert_equal "$stderr" ""
}

@test "--wait expired: 75 (and -E)" {
	rcli SET 'rlock:{e}' someone-else PX 600000
	run -75 rlock -w 300ms -k e -- touch ran
	[[ ! -e ran ]]
	run -9 rlock -w 0.2 -E 9 -k e -- touch ran
	[[ ! -e ran ]]
}

@test "--status: 0 when free, 75 when held, -E applies" {
	run -0 rlock -k e --status
	rcli SET 'rlock:{e}' someone-else PX 600000
	run -75 rlock -k e --status
	run -5 rlock -E 5 -k e --status
}

@test "--status on an unreachable server: 69" {
	local port
	port=$(dead_port)
	run -69 rlock -u "redis://127.0.0.1:$port" -k e --status
}

@test "a non-zero exit still releases the lock" {
	run -1 rlock -k e -- false
	run -0 rlock -n -k e -- true
	key_absent 'rlock:{e}'
}

@test "-E 0 with --wait expired: exit 0 silently, command not run" {
	rcli SET 'rlock:{e}' someone-else PX 600000
	run -0 --separate-stderr rlock -w 300ms -E 0 -k e -- touch ran
	[[ ! -e ran ]]
	assert_equal "$stderr" ""
}
