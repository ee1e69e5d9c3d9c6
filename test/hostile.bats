#!/usr/bin/env bats
# A hostile server (the suite's only fake one) answers with bad replies: rlock must
# fail with exit 69 and one line on stderr, never run the command, never hang, and
# never buffer without bound (hiredis has no cap on bulk length: TRAPS.md).

# shellcheck disable=SC2154  # bats sets $stderr (run --separate-stderr)
load helpers

setup_file() { rlock_require_binary; }
teardown_file() { :; }
setup() { cd "$BATS_TEST_TMPDIR" || return 1; }
teardown() { kill_tracked; }

# hostile MODE: start the fake server; sets HPORT.
hostile() {
	HPORT=$(free_port)
	perl "$BATS_TEST_DIRNAME/hostile-server.pl" "$HPORT" "$1" "$BATS_TEST_TMPDIR/ready" 3>&- 4>&- &
	track_pid $!
	wait_until 30 test -e "$BATS_TEST_TMPDIR/ready"
}

# expect_69: run rlock against the hostile server; it must refuse, quietly, and not
# hang: without the 1 s io deadline it would wait forever. The bound, 60 s, is "not
# hung", not a speed: a valgrind rlock on a loaded machine takes 10-15 s here.
# Sets ELAPSED_MS.
expect_69() {
	local t0
	t0=$(now_ms)
	run --separate-stderr "$RLOCK" -u "redis://127.0.0.1:$HPORT" --io-timeout 1s "$@" -k h -- touch ran
	ELAPSED_MS=$(($(now_ms) - t0))
	((status == 69)) || fail "exit $status, not 69, after $ELAPSED_MS ms; stderr: $stderr"
	[[ ! -e ran ]] || fail "the command ran against a hostile server"
	assert_equal "$(printf '%s\n' "$stderr" | wc -l)" 1
	assert_regex "$stderr" '^rlock: '
	((ELAPSED_MS < 60000)) || fail "took $ELAPSED_MS ms: hung"
}

# expect_69_at_once MODE: without -w (a passing outage is waited out forever), a header
# no Redis server can send is final: 69 at once, not "did not answer" and a retry.
expect_69_at_once() {
	local t0
	hostile "$1"
	t0=$(now_ms)
	run --separate-stderr timeout -s KILL 30 "$RLOCK" -u "redis://127.0.0.1:$HPORT" \
		--io-timeout 1s -k h -- touch ran
	ELAPSED_MS=$(($(now_ms) - t0))
	((status == 69)) || fail "exit $status, not 69, after $ELAPSED_MS ms; stderr: $stderr"
	[[ ! -e ran ]] || fail "the command ran against a hostile server"
	assert_equal "$(printf '%s\n' "$stderr" | wc -l)" 1
	run ! grep -q 'did not answer' <<<"$stderr"
}

@test "garbage instead of a reply" {
	hostile garbage
	expect_69
	assert_regex "$stderr" 'protocol error'
}

@test "two replies to one request" {
	hostile extra
	expect_69
	assert_regex "$stderr" 'unexpected data after the reply'
}

@test "wrong reply type to the acquire script" {
	hostile status
	expect_69
	assert_regex "$stderr" 'unexpected reply'
}

@test "reply nested deeper than any real one" {
	hostile deep
	expect_69
}

@test "reply nested 262 000 deep (under the size cap): refused, no stack overflow" {
	# hiredis 1.0-1.4 has no nesting limit and frees a reply recursively: before
	# resp.c capped the depth, rlock linked against hiredis 1.2 died of SIGSEGV here.
	hostile verydeep
	expect_69
	assert_regex "$stderr" 'nested too deeply'
}

@test "bulk string with a broken terminator" {
	hostile badcrlf
	expect_69
}

@test "NOAUTH is reported as a missing password" {
	hostile noauth
	expect_69
	assert_regex "$stderr" 'requires a password'
}

@test "enormous bulk length: bounded buffering" {
	hostile bigbulk
	expect_69
	assert_regex "$stderr" 'bulk string longer than'
}

@test "a bulk length of 2^63 - 2 and then nothing: final, 69 at once (no -w)" {
	expect_69_at_once bulkhang
	assert_regex "$stderr" 'bulk string longer than'
}

@test "a RESP3 type on a RESP2 connection and then nothing: final, 69 at once (no -w)" {
	# hiredis 0.14 refuses the type byte itself; 1.x reads a RESP3 map and would wait
	expect_69_at_once resp3hang
	assert_regex "$stderr" 'protocol error'
}

@test "enormous array: bounded buffering" {
	hostile bigarray
	expect_69
}

@test "server closes the connection at once: an outage -w rides out (not a TLS port: it does not answer a ClientHello), then 69" {
	# (it was 69 at once, "is it a TLS port?", as any first connection closed so)
	hostile close
	local t0 ms
	t0=$(now_ms)
	run --separate-stderr timeout -s KILL 30 "$RLOCK" -u "redis://127.0.0.1:$HPORT" \
		--io-timeout 1s -w 2s -k h -- touch ran
	ms=$(($(now_ms) - t0))
	((status == 69)) || fail "exit $status, not 69, after $ms ms; stderr: $stderr"
	[[ ! -e ran ]] || fail "the command ran against a hostile server"
	assert_regex "$stderr" 'retrying for up to'
	assert_regex "$stderr" 'closed the connection'
	[[ $stderr != *TLS* ]] || fail "a port that does not answer TLS called a TLS port: $stderr"
	((ms >= 1500)) || fail "gave up after $ms ms, within the -w 2s"
}

@test "a connection closed mid-reply: 69, one line, and no hint about a TLS port (it spoke RESP)" {
	hostile halfclose
	expect_69
	assert_regex "$stderr" 'closed the connection'
	[[ $stderr != *TLS* ]] || fail "a RESP server told to look for a TLS port: $stderr"
}

@test "a server that spoke RESP to this run, then closes each new connection: no hint about a TLS port" {
	# a waiter (-w) got a busy reply, then every try on a fresh connection is closed
	# before a byte of reply: the server is in trouble, it is not a TLS port
	hostile busyclose
	run --separate-stderr timeout -s KILL 30 "$RLOCK" -u "redis://127.0.0.1:$HPORT" \
		--io-timeout 1s -w 2s -k h -- touch ran
	((status == 69)) || fail "exit $status, not 69; stderr: $stderr"
	[[ ! -e ran ]] || fail "the command ran against a hostile server"
	assert_regex "$stderr" 'closed the connection'
	[[ $stderr != *TLS* ]] || fail "a RESP server told to look for a TLS port: $stderr"
	[[ $stderr != *'not tried'* ]] || fail "the give-up hides the server's last error: $stderr"
}

@test "server never answers: the io deadline" {
	hostile hang
	expect_69 -n # waiting would retry a server that does not answer (it may be paused)
	echo "# server never answers: rlock exit 69 after $ELAPSED_MS ms (io deadline 1 s)" >&3
	assert_regex "$stderr" 'did not answer'
}

@test "a server's error text with terminal escapes: --check prints it escaped, never raw (issue 33)" {
	hostile escape
	run --separate-stderr "$RLOCK" -u "redis://127.0.0.1:$HPORT" --io-timeout 1s --check
	[[ $output$stderr == *'\x1b[31mred'* ]] || fail "not shown escaped: $output $stderr"
	[[ $output$stderr != *$'\e'* && $output$stderr != *$'\x9b'* && $output$stderr != *$'\a'* ]] ||
		fail "a raw escape reached the terminal: $(printf '%s\n%s' "$output" "$stderr" | cat -v)"
	[[ $output$stderr == *'#\x23[add-mask]rlock'* && $output$stderr != *'##'* ]] ||
		fail "a CI runner's command, raw: $output $stderr"
	run --separate-stderr "$RLOCK" -u "redis://127.0.0.1:$HPORT" --io-timeout 1s --check --json
	jq -e . <<<"$output" >/dev/null || fail "not JSON: $output"
	# JSON too: nothing a terminal or a runner obeys (the C1 CSI as UTF-8, "##[")
	[[ $output != *$'\xc2\x9b'* && $output != *'##'* && $output == *'\u009b #\u0023[add-mask]'* ]] ||
		fail "raw in JSON: $(cat -v <<<"$output")"
}

@test "a sentinel's error text is escaped once on the line that prints it (not \\x5cx1b)" {
	hostile escape
	run -69 --separate-stderr timeout -s KILL 60 "$RLOCK" -u "redis-sentinel://127.0.0.1:$HPORT/mymaster" \
		--io-timeout 1s -k h -- touch ran
	[[ ! -e ran ]] || fail "the command ran"
	[[ $stderr == *"sentinel 127.0.0.1:$HPORT: ERR \x1b[31mred\x1b]0;title\x07 \x9b2J \xc2\x9b #\x23[add-mask]rlock"* ]] ||
		fail "not escaped exactly once: $stderr"
	[[ $stderr != *$'\e'* && $stderr != *'\x5c'* ]] || fail "raw or escaped twice: $(cat -v <<<"$stderr")"
}

@test "a LOADING whose text holds terminal escapes: a waiter's live line on a terminal shows it escaped" {
	# The live line (a terminal only) says what the waiter waits for: the server's
	# last error, which is the server's own text.
	hostile loadescape
	(clean_exec script -qfec "$RLOCK -u redis://127.0.0.1:$HPORT --io-timeout 1s -w 2s -k h -- true; echo rlock-exit=\$? >exitcode" \
		/dev/null) </dev/null >tty-out 2>&1
	assert_equal "$(cat exitcode)" rlock-exit=69
	grep -q 'waiting .* LOADING \\x1b\[31mred' tty-out || fail "no live line with the error escaped: $(cat -v tty-out)"
	# the live line's own "\r\e[K" aside, no escape, bell or C1 control reaches the terminal
	local out
	out=$(sed 's/\x1b\[K//g' tty-out)
	[[ $out != *$'\e'* && $out != *$'\x9b'* && $out != *$'\a'* ]] ||
		fail "a raw escape reached the terminal: $(cat -v tty-out)"
}

@test "a server that fails mid-SCAN, after its first page: --list prints nothing (text and JSON), 69, one line" {
	hostile scanbreak
	local json
	for json in "" --json; do
		run -69 --separate-stderr timeout -s KILL 30 "$RLOCK" -u "redis://127.0.0.1:$HPORT" \
			--io-timeout 1s --list $json
		assert_equal "$output" ""
		assert_one_line_error
		assert_regex "$stderr" 'failed mid-SCAN'
	done
	# the first page was served (the header would have followed it)
	[[ $(wc -l <ready.count) -ge 4 ]]
}

@test "a server's error longer than rlock's buffers: cut in the middle, shown, its end kept, never inside a UTF-8 sequence" {
	# 813 bytes of error text, mostly e-acute (2 bytes of UTF-8), "END-OF-REASON" last:
	# every copy into a fixed buffer (the acquire's reason, --list's SCAN, --check's
	# fact, a sentinel's answer, the events file's reason) cuts in the middle, visibly
	hostile longerr
	local e='\\xc3\\xa9' cut
	cut="$e\\.\\.\\.$e( $e)*"
	expect_69 --events ev.json
	[[ $stderr =~ ERR\ $e.*$cut.*\ END-OF-REASON$ ]] || fail "not cut in the middle, whole sequences: $stderr"
	jq -e --arg c '...' '.reason | (contains($c) and endswith(" END-OF-REASON") and (contains("\ufffd") | not))' ev.json ||
		fail "events: $(cat ev.json)"
	run -69 --separate-stderr "$RLOCK" -u "redis://127.0.0.1:$HPORT" --io-timeout 1s --list
	[[ $stderr =~ ^rlock:\ 127\.0\.0\.1:$HPORT:\ SCAN:\ ERR\ $e.*$cut.*\ END-OF-REASON$ ]] || fail "--list: $stderr"
	run -69 --separate-stderr "$RLOCK" -u "redis://127.0.0.1:$HPORT" --io-timeout 1s --check
	[[ $output =~ PING:\ ERR\ $e.*$cut.*\ END-OF-REASON\; ]] || fail "--check: $output"
	run -69 --separate-stderr "$RLOCK" -u "redis://127.0.0.1:$HPORT" --io-timeout 1s --check --json
	jq -e --arg c 'é...é' '.findings[0].fact | (contains($c) and endswith(" END-OF-REASON") and (contains("\ufffd") | not))' <<<"$output" ||
		fail "--check --json: $output"
	# short deadlines: the discovery retries the sentinel until its own cap
	run -69 --separate-stderr timeout -s KILL 30 "$RLOCK" -u "redis-sentinel://127.0.0.1:$HPORT/mymaster" \
		--connect-timeout 200ms --io-timeout 500ms -k h -- touch ran
	[[ $stderr =~ sentinel\ 127.0.0.1:$HPORT:\ ERR\ $e.*$cut.*\ END-OF-REASON\)?$ ]] || fail "sentinel: $stderr"
}
