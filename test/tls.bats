#!/usr/bin/env bats
# shellcheck disable=SC2016,SC2154,SC2153  # quoted $: for rlock; bats sets $stderr; TLS_* from helpers
# TLS (SPEC §2, issue 3): rediss:// and --tls against a real TLS redis-server with
# certificates generated here by openssl. Chain and host name (or IP) are verified;
# every refusal is exit 69 with one line on stderr; the handshake is bounded by the
# connect deadline; TLS ≥ 1.2.

load helpers

setup_file() {
	rlock_require_binary
	mkdir -p "$XDG_CONFIG_HOME"
	tls_make_certs "$BATS_FILE_TMPDIR/certs"
	# A plaintext server (the default fixture: FLUSHALL, TLS-to-plaintext test).
	redis_start
	# A: TLS only, no client certificates, reachable on 127.0.0.1 and 127.0.0.2.
	tls_redis_start --bind 127.0.0.1 127.0.0.2
	export TLS_A_PORT=$TLS_PORT TLS_A_PID=$TLS_PID
	# B: TLS only, client certificate required.
	tls_redis_start --tls-auth-clients yes
	export TLS_B_PORT=$TLS_PORT TLS_B_PID=$TLS_PID
	# C: TLS only, serving an expired certificate.
	tls_redis_start --cert "$TLS_CERTS/expired.pem"
	export TLS_C_PORT=$TLS_PORT TLS_C_PID=$TLS_PID
	export CA=$TLS_CERTS/ca.pem OTHER_CA=$TLS_CERTS/other-ca.pem
}

setup() {
	common_setup
	tls_cli "$TLS_A_PORT" FLUSHALL >/dev/null
	tls_cli "$TLS_B_PORT" FLUSHALL >/dev/null
}

# elapsed_since START_MS → ms
elapsed_since() { echo $(($(now_ms) - $1)); }

@test "valid chain accepted: rediss://127.0.0.1 with --cacert" {
	run -0 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$CA" \
		-k t -- sh -c 'echo "ran $RLOCK_KEY"'
	assert_output 'ran rlock:{t}'
	assert_equal "$stderr" ''
	# the lock really went through the TLS server (fence counter there), and is released
	assert_equal "$(tls_cli "$TLS_A_PORT" GET 'rlock:{t}:fence')" 1
	assert_equal "$(tls_cli "$TLS_A_PORT" EXISTS 'rlock:{t}')" 0
	key_absent 'rlock:{t}:fence'
}

@test "valid chain accepted: rediss://localhost (DNS name in SAN)" {
	run -0 --separate-stderr rlock -u "rediss://localhost:$TLS_A_PORT" --cacert "$CA" \
		-k t -- echo ran
	assert_output ran
	assert_equal "$(tls_cli "$TLS_A_PORT" GET 'rlock:{t}:fence')" 1
}

@test "valid chain accepted: --tls with a redis:// URL" {
	run -0 --separate-stderr rlock --tls -u "redis://127.0.0.1:$TLS_A_PORT" --cacert "$CA" \
		-k t -- echo ran
	assert_output ran
	assert_equal "$(tls_cli "$TLS_A_PORT" GET 'rlock:{t}:fence')" 1
	# the same with the URL from the environment
	RLOCK_URL="redis://127.0.0.1:$TLS_A_PORT" run -0 rlock --tls --cacert "$CA" -k t -- echo ran
	assert_equal "$(tls_cli "$TLS_A_PORT" GET 'rlock:{t}:fence')" 2
}

@test "valid chain accepted: --cacertdir (hashed directory)" {
	run -0 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" \
		--cacertdir "$TLS_CERTS/cadir" -k t -- echo ran
	assert_output ran
	# a hashed directory holding only the unrelated CA: refused
	mkdir otherdir
	cp "$OTHER_CA" otherdir/
	openssl rehash otherdir 2>/dev/null || c_rehash otherdir >/dev/null
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" \
		--cacertdir otherdir -k t -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
	# the hint names the option given (not --cacert), and the hash names it is searched by
	assert_regex "$stderr" '; does --cacertdir hold the CA that signed the server.s certificate, under its hash name \(openssl rehash DIR\)\?$'
	# the right CA copied in without its hash name: not found, the same hint
	mkdir nohash
	cp "$CA" nohash/
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" \
		--cacertdir nohash -k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'openssl rehash DIR\)\?$'
	[[ ! -e ran ]]
	# a missing directory: a file that cannot be read (66), with a one-line reason
	run -66 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" \
		--cacertdir "$BATS_TEST_TMPDIR/nope" -k t -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
}

@test "a lease renewed and a waiter woken over TLS (all connections verified)" {
	# Renewals every ~1.3 s on the renewal thread's own TLS connection: wait until four
	# were seen (more than one lease), so the lease lived on only through them. A 4 s
	# lease leaves a loaded TSan pass slack (1 s and 2 s leases were lost there).
	rlock_bg -u "rediss://localhost:$TLS_A_PORT" --cacert "$CA" -t 4s -k r -- "$HOLD" a
	local holder=$RLOCK_PID holder_err=$RLOCK_ERR
	wait_until 30 test -e a.started
	rlock_bg -u "rediss://localhost:$TLS_A_PORT" --cacert "$CA" -t 4s -k r -- "$HOLD" b
	local waiter=$RLOCK_PID
	renewed_reset
	wait_until 30 renewed 4 'rlock:{r}' tls_cli "$TLS_A_PORT"
	[[ ! -e b.started ]]
	assert_equal "$(tls_cli "$TLS_A_PORT" GET 'rlock:{r}:fence')" 1
	touch a.release
	rlock_wait "$holder"
	[[ $RLOCK_STATUS == 0 ]] || fail "holder exit $RLOCK_STATUS: $(cat "$holder_err")"
	wait_until 30 test -e b.started
	touch b.release
	rlock_wait "$waiter"
	assert_equal "$RLOCK_STATUS" 0
	assert_equal "$(tls_cli "$TLS_A_PORT" GET 'rlock:{r}:fence')" 2
}

@test "wrong CA: 69, one line, command not run" {
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$OTHER_CA" \
		-k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" '[Cc]ertificate|verif|issuer'
	# The hint (issue 38): the CA named is not the one that signed it.
	assert_regex "$stderr" "; is --cacert the CA that signed the server's certificate\?$"
	[[ ! -e ran ]]
	assert_equal "$(tls_cli "$TLS_A_PORT" EXISTS 'rlock:{t}:fence')" 0
}

@test "no --cacert: the system trust store does not know the test CA: 69" {
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" -k t -- touch ran
	assert_one_line_error
	# A hint at --cacert (issue 38): a private CA is the likely cause.
	assert_regex "$stderr" 'certificate verify failed \(.*\); a private CA\? name its certificate with --cacert FILE$'
	[[ ! -e ran ]]
}

@test "wrong host: cert for 127.0.0.1 only, connecting to 127.0.0.2: 69 mismatch" {
	# (redis-cli --tls and hiredis accept this; rlock must not)
	run -69 --separate-stderr rlock -u "rediss://127.0.0.2:$TLS_A_PORT" --cacert "$CA" \
		-k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" '[Mm]ismatch'
	assert_regex "$stderr" '127\.0\.0\.2'
	[[ ! -e ran ]]
	run -69 --separate-stderr rlock --tls -u "redis://127.0.0.2:$TLS_A_PORT" --cacert "$CA" \
		-k t -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
}

@test "wrong name via --sni: 69 mismatch" {
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$CA" \
		--sni wrong.example -k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" '[Mm]ismatch'
	assert_regex "$stderr" 'wrong\.example'
	[[ ! -e ran ]]
}

@test "--sni localhost to 127.0.0.2: accepted (the name is verified, not the address)" {
	run -0 --separate-stderr rlock -u "rediss://127.0.0.2:$TLS_A_PORT" --cacert "$CA" \
		--sni localhost -k t -- echo ran
	assert_output ran
	assert_equal "$(tls_cli "$TLS_A_PORT" GET 'rlock:{t}:fence')" 1
}

@test "expired server certificate: 69, one line" {
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_C_PORT" --cacert "$CA" \
		-k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" '[Ee]xpired'
	[[ $stderr != *'--cacert'* ]] || fail "a CA hint for an expired certificate: $stderr"
	[[ ! -e ran ]]
	# --check: the fix is the certificate's, not "the network" (the server answered)
	run -69 rlock -u "rediss://127.0.0.1:$TLS_C_PORT" --cacert "$CA" --check
	assert_line --regexp "reach: .*certificate has expired.*; fix: make the certificate verify: "
	# a client certificate the server refuses (of another CA): the fix names --cert
	# (when its alert came: a reset that carried none says only that)
	run -69 rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		--cert "$TLS_CERTS/other-ca.pem" --tls-key "$TLS_CERTS/other-ca.key" --check
	[[ $output != *alert* ]] ||
		assert_line --regexp "reach: .*; fix: give --cert and --tls-key: a client certificate "
}

@test "revocation lists in --cacert or --cacertdir are checked: a revoked server certificate is 69 (certificate revoked), one not revoked is accepted" {
	# OpenSSL kept the CRLs of the bundle in the store and never consulted them: a
	# revoked certificate was accepted.
	(
		cd "$TLS_CERTS" && export OPENSSL_CONF=$TLS_CERTS/openssl.cnf &&
			openssl ca -batch -config openssl.cnf -notext -days 30 -extfile openssl.cnf \
				-extensions srv -subj "/CN=rlock revoked server" -in server.csr \
				-out "$BATS_TEST_TMPDIR/revoked.pem" &&
			openssl ca -config openssl.cnf -revoke "$BATS_TEST_TMPDIR/revoked.pem" &&
			openssl ca -config openssl.cnf -gencrl -crldays 30 -out "$BATS_TEST_TMPDIR/crl.pem"
	) >gen.log 2>&1 || fail "openssl: $(cat gen.log)"
	cat "$CA" crl.pem >ca+crl.pem
	tls_redis_start --cert "$BATS_TEST_TMPDIR/revoked.pem"
	# without the list nothing says it is revoked
	run -0 rlock -u "rediss://127.0.0.1:$TLS_PORT" --cacert "$CA" -k t -- echo ran
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_PORT" --cacert ca+crl.pem \
		-k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" 'certificate verify failed \(certificate revoked\)$'
	[[ ! -e ran ]]
	run -0 rlock -u "rediss://127.0.0.1:$TLS_A_PORT" --cacert ca+crl.pem -k t -- echo ran
	assert_output ran
	# the same list in a hashed --cacertdir (HASH.r0)
	mkdir crldir
	cp "$CA" crl.pem crldir/
	openssl rehash crldir 2>/dev/null || c_rehash crldir >/dev/null
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_PORT" --cacertdir crldir \
		-k t -- touch ran
	assert_regex "$stderr" 'certificate verify failed \(certificate revoked\)$'
	[[ ! -e ran ]]
	run -0 rlock -u "rediss://127.0.0.1:$TLS_A_PORT" --cacertdir crldir -k t -- echo ran
}

@test "a renewal's reconnect verifies the certificate again: one expired meanwhile is a lost lock (79), its reason on the line" {
	# A server of this test's own, whose certificate is swapped for the expired one
	# (same key) while the lock is held; the renewal's connection is then dropped.
	tls_redis_start
	local port=$TLS_PORT
	rlock_bg -u "rediss://127.0.0.1:$port" --cacert "$CA" -t 3s -k rv -- "$HOLD" a
	local holder=$RLOCK_PID err=$RLOCK_ERR
	wait_until 30 test -e a.started
	tls_cli "$port" CONFIG SET tls-cert-file "$TLS_CERTS/expired.pem" >/dev/null
	redis-cli --tls --insecure -p "$port" CLIENT KILL TYPE normal >/dev/null
	rlock_wait "$holder" 30
	[[ $RLOCK_STATUS == 79 ]] || fail "exit $RLOCK_STATUS: $(cat "$err")"
	grep -q '^rlock: lock lost: .*certificate verify failed (certificate has expired)' "$err" ||
		fail "no reason: $(cat "$err")"
	[[ ! -e a.end ]] # stopped, not run to its end
}

@test "plaintext client to a TLS port: 69 within the connect deadline" {
	local t0
	t0=$(now_ms)
	run -69 --separate-stderr rlock -u "redis://127.0.0.1:$TLS_A_PORT" \
		--connect-timeout 1s --io-timeout 1s -k t -- touch ran
	local ms
	ms=$(elapsed_since "$t0")
	assert_one_line_error
	[[ ! -e ran ]]
	# bounded by the deadlines (2 s), plus process start-up: printed, loosely bounded
	echo "# plaintext to a TLS port: 69 after ${ms} ms (deadlines 1 s + 1 s)" >&3
	((ms < 10000)) || fail "took ${ms} ms"
}

@test "Redlock, a plaintext client to a node's TLS port: final as for one server (69 at once, not a wait without end)" {
	# One server: 69 at once (above). Two Redlock nodes, one of them a TLS port: the other
	# alone is no quorum, and waiting cannot make the TLS port answer plaintext.
	local t0 ms
	t0=$(now_ms)
	run --separate-stderr timeout -s KILL 30 "$RLOCK" \
		-u "redis://127.0.0.1:$TLS_A_PORT,redis://127.0.0.1:$REDIS_PORT" -k t -- touch ran
	ms=$(elapsed_since "$t0")
	((status == 69)) || fail "exit $status after $ms ms, not 69; stderr: $stderr"
	assert_one_line_error
	assert_regex "$stderr" "127\.0\.0\.1:$TLS_A_PORT.*is it a TLS port\?"
	[[ ! -e ran ]]
	((ms < 10000)) || fail "took ${ms} ms"
}

@test "TLS client to a plaintext port: 69, one line, within the connect deadline" {
	local t0 ms
	t0=$(now_ms)
	# no -n, no -w: a plaintext Redis is told from a paused TLS server (it answers a
	# newline), so rlock does not wait for it to learn TLS
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$REDIS_PORT" --cacert "$CA" \
		--connect-timeout 1s --io-timeout 30s -k t -- touch ran
	ms=$(elapsed_since "$t0")
	assert_one_line_error
	assert_regex "$stderr" 'answered in plaintext .*use redis://'
	[[ ! -e ran ]]
	# the handshake is bounded by the connect deadline (1 s), not the io deadline (30 s):
	# the bound sits between the two, far from both, so that a slow pass cannot cross it
	echo "# TLS to a plaintext port: 69 after ${ms} ms (connect deadline 1 s)" >&3
	((ms < 15000)) || fail "took ${ms} ms (connect deadline 1 s, io deadline 30 s)"
	key_absent 'rlock:{t}:fence'
}

@test "TLS handshake to a silent server is bounded by --connect-timeout" {
	# A listener that completes TCP (kernel backlog) but never speaks.
	(exec 3>&- 4>&- perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
			Listen => 5, ReuseAddr => 1) or die "listen: $!";
		open my $f, ">", "$ARGV[0].tmp" or die; print $f $s->sockport, "\n"; close $f;
		rename "$ARGV[0].tmp", $ARGV[0]; sleep 60' "$BATS_TEST_TMPDIR/silent.port") &
	track_pid $!
	wait_until 30 test -s silent.port
	local port t0 ms
	port=$(cat silent.port)
	t0=$(now_ms)
	# -n: a silent handshake may pass (a paused server), so a wait would retry it
	run -69 --separate-stderr rlock -n -u "rediss://127.0.0.1:$port" --cacert "$CA" \
		--connect-timeout 1s --io-timeout 30s -k t -- touch ran
	ms=$(elapsed_since "$t0")
	assert_one_line_error
	[[ ! -e ran ]]
	# not before the connect deadline; far before the io deadline (see above)
	echo "# TLS handshake to a silent server: 69 after ${ms} ms (connect deadline 1 s)" >&3
	((ms >= 990 && ms < 15000)) || fail "took ${ms} ms (connect deadline 1 s, io deadline 30 s)"
	# a Redlock node so: held on the other two, the line names the stage that met the
	# silence, as one server's does (it said "connect to", TCP's, which had succeeded)
	run -0 --separate-stderr rlock --cacert "$CA" --cert "$TLS_CERTS/client.pem" \
		--tls-key "$TLS_CERTS/client.key" \
		-u "rediss://127.0.0.1:$port,rediss://127.0.0.1:$TLS_A_PORT,rediss://127.0.0.1:$TLS_B_PORT" \
		-k t -- touch ran
	[[ -e ran ]]
	assert_regex "$stderr" "missing: 127\.0\.0\.1:$port \(TLS handshake with 127\.0\.0\.1:$port: no answer within [0-9]+ ms"
}

@test "TLS handshake to a silent server: no plaintext probe past the --wait deadline" {
	# A listener that accepts and reads but never speaks; it writes down how many bytes
	# it got once the client hangs up. After a silent handshake rlock may send filler to
	# tell a plaintext Redis from a paused TLS server (up to 250 ms): never past -w.
	(exec 3>&- 4>&- perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
			Listen => 5, ReuseAddr => 1) or die "listen: $!";
		open my $f, ">", "$ARGV[0].tmp" or die; print $f $s->sockport, "\n"; close $f;
		rename "$ARGV[0].tmp", $ARGV[0];
		my $c = $s->accept or die "accept: $!"; my ($n, $b, $r) = (0);
		$n += $r while ($r = sysread($c, $b, 65536));
		open $f, ">", "$ARGV[1].tmp" or die; print $f "$n\n"; close $f;
		rename "$ARGV[1].tmp", $ARGV[1]; sleep 60' \
		"$BATS_TEST_TMPDIR/silent.port" "$BATS_TEST_TMPDIR/silent.bytes") &
	track_pid $!
	wait_until 30 test -s silent.port
	local port t0 ms
	port=$(cat silent.port)
	t0=$(now_ms)
	# the connect deadline (30 s) far beyond -w: -w is the one that ends the handshake
	run -69 --separate-stderr rlock -w 0.5 -u "rediss://127.0.0.1:$port" --insecure \
		--connect-timeout 30s --io-timeout 30s -k t -- touch ran
	ms=$(elapsed_since "$t0")
	[[ ! -e ran ]]
	wait_until 30 test -s silent.bytes
	echo "# silent TLS handshake, -w 0.5: 69 after ${ms} ms, $(cat silent.bytes) bytes sent" >&3
	# the ClientHello only (well under 4 KiB), no probe's filler (4 KiB and more) ...
	(($(cat silent.bytes) < 4096)) || fail "$(cat silent.bytes) bytes sent: probed past -w"
	# ... and not before -w (the time's upper side is the bytes' to judge: a process's
	# start on a loaded machine, or under a sanitizer, takes longer than the probe)
	((ms >= 490 && ms < 15000)) || fail "took ${ms} ms (-w 0.5)"
}

@test "client certificate required by the server: without it 69, with it accepted" {
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		-k t -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
	# the server's alert ("certificate required") comes with what to do (a reset that
	# carried no alert says only that)
	[[ $stderr != *alert* ]] ||
		assert_regex "$stderr" 'alert .*; the server asks for a client certificate: give --cert and --tls-key$'
	run -0 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		--cert "$TLS_CERTS/client.pem" --tls-key "$TLS_CERTS/client.key" -k t -- echo ran
	assert_output ran
	assert_equal "$(tls_cli "$TLS_B_PORT" GET 'rlock:{t}:fence')" 1
	# a certificate the server's CA did not sign: refused
	run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		--cert "$TLS_CERTS/other-ca.pem" --tls-key "$TLS_CERTS/other-ca.key" -k t -- touch ran
	assert_one_line_error
	[[ $stderr != *'give --cert'* ]] || fail "a hint to give --cert that was given: $stderr"
	# the server's alert ("unknown ca") judges our certificate, not its own: said so,
	# naming the file (as above, a reset that carried no alert says only that)
	[[ $stderr != *alert* ]] ||
		assert_regex "$stderr" 'alert unknown ca; the server refused the client certificate \(--cert .*/other-ca\.pem\)$'
	[[ ! -e ran ]]
}

@test "--cert and --tls-key go together; TLS options need TLS: 64" {
	run -64 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		--cert "$TLS_CERTS/client.pem" -k t -- touch ran
	assert_one_line_error
	run -64 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		--tls-key "$TLS_CERTS/client.key" -k t -- touch ran
	assert_one_line_error
	run -64 --separate-stderr rlock -u "redis://127.0.0.1:$REDIS_PORT" --cacert "$CA" \
		-k t -- touch ran
	assert_one_line_error
	# an empty or malformed --sni is a usage error, not an unavailable server (was 69)
	local sni
	for sni in '' 'a b' "$(printf 'x%.0s' {1..256})" localhost:6379 '[::1]' '*.example.com' \
		a..b localhost. "$(printf 'x%.0s' {1..64})"; do
		run -64 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
			--sni "$sni" -k t -- touch ran
		assert_one_line_error
		assert_regex "$stderr" '^rlock: --sni: '
	done
	[[ ! -e ran ]]
	# what a certificate can name is taken: an IPv6 address, a name with '_'
	run -0 rlock -u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$CA" --sni 127.0.0.1 -k t -- true
	for sni in ::1 my_host.example; do
		run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$CA" \
			--sni "$sni" -k t -- touch ran
		assert_regex "$stderr" "mismatch: certificate not valid for $sni\\)"
	done
}

@test "client key file not matching: 66 (the user's file, not the server); missing: 66 (a file that cannot be read); one line, never run" {
	run --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		--cert "$TLS_CERTS/client.pem" --tls-key "$TLS_CERTS/server.key" -k t -- touch ran
	[[ $status == 66 ]] || fail "status $status"
	assert_regex "$stderr" "client key .*server.key"
	assert_one_line_error
	run --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		--cert "$TLS_CERTS/client.pem" --tls-key "$BATS_TEST_TMPDIR/none.key" -k t -- touch ran
	[[ $status == 66 ]] || fail "status $status"
	assert_one_line_error
	[[ ! -e ran ]]
}

@test "a --tls-key others can read is refused (66, one line), as ssh refuses an unprotected key; its group may read it" {
	# The client key is a credential as a password file is: the same rule.
	cp "$TLS_CERTS/client.key" open.key
	chmod 644 open.key
	run -66 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		--cert "$TLS_CERTS/client.pem" --tls-key open.key -k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "--tls-key: 'open.key' is a private key accessible by others \(mode 644\)"
	[[ ! -e ran ]]
	chmod 640 open.key
	run -0 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_B_PORT" --cacert "$CA" \
		--cert "$TLS_CERTS/client.pem" --tls-key open.key -k t -- echo ran
	assert_output ran
}

@test "--insecure accepts the wrong CA, a host mismatch and an expired certificate" {
	run -0 --separate-stderr rlock -u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$OTHER_CA" \
		--insecure -k t -- echo ran
	assert_output ran
	# a warning is allowed, but at most one line and not an error
	(($(printf '%s' "$stderr" | grep -c '') <= 1))
	run -0 rlock -u "rediss://127.0.0.2:$TLS_A_PORT" --insecure -k t -- echo ran
	run -0 rlock -u "rediss://127.0.0.1:$TLS_C_PORT" --insecure -k t -- echo ran
	assert_equal "$(tls_cli "$TLS_A_PORT" GET 'rlock:{t}:fence')" 2
}

@test "TLS below 1.2 is refused even when the system OpenSSL config allows it" {
	# OPENSSL_CONF=/dev/null drops Debian's system-wide MinProtocol = TLSv1.2, so
	# only rlock's own minimum stands between it and a TLS 1.1 server.
	local port
	port=$(free_port)
	(exec 3>&- 4>&- env OPENSSL_CONF=/dev/null openssl s_server -quiet \
		-accept "127.0.0.1:$port" -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0' \
		-cert "$TLS_CERTS/server.pem" -key "$TLS_CERTS/server.key" \
		</dev/null >"$BATS_TEST_TMPDIR/s_server.log" 2>&1) &
	track_pid $!
	# ready, and really speaking TLS 1.1 (else this test would prove nothing)
	wait_until 30 sh -c "echo | OPENSSL_CONF=/dev/null openssl s_client \
		-connect 127.0.0.1:$port -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0' 2>/dev/null |
		grep -q 'Protocol.*TLSv1.1'"
	OPENSSL_CONF=/dev/null run -69 --separate-stderr rlock -u "rediss://127.0.0.1:$port" \
		--cacert "$CA" --connect-timeout 2s -k t -- touch ran
	assert_one_line_error
	[[ ! -e ran ]]
}

@test "--acquire with relative --cacert, --cert and --tls-key: the keeper (in /) still finds them, renews and releases" {
	cp "$CA" ca.pem
	cp "$TLS_CERTS/client.pem" "$TLS_CERTS/client.key" .
	local u="rediss://127.0.0.1:$TLS_B_PORT" k
	run -0 --separate-stderr rlock -u "$u" --cacert ca.pem --cert client.pem \
		--tls-key client.key -t 2s -k kt --acquire
	eval "$output"
	k=$(tls_cli "$TLS_B_PORT" HGET 'rlock:{kt}:owner' pid)
	track_pid "$k"
	[[ $(tls_cli "$TLS_B_PORT" GET 'rlock:{kt}') == "$RLOCK_TOKEN" ]]
	# Past a lease: renewed by the keeper over its own TLS connections.
	renewed_reset
	wait_until 30 renewed 4 'rlock:{kt}' tls_cli "$TLS_B_PORT"
	run -0 --separate-stderr rlock -u "$u" --cacert ca.pem --cert client.pem \
		--tls-key client.key -k kt --release
	wait_until 20 proc_gone "$k"
	# a read that fails is no answer: the key is gone only if the server says so
	run -0 tls_cli "$TLS_B_PORT" EXISTS 'rlock:{kt}'
	assert_output 0
}

@test "a TLS handshake that times out (a paused TLS server) is waited out within -w: the job runs once it answers" {
	tls_redis_start
	local port=$TLS_PORT pid=$TLS_PID
	# Stopped: the kernel still completes the TCP connect, the handshake gets no reply.
	kill -STOP "$pid"
	rlock_bg -w 60s --connect-timeout 500ms --io-timeout 500ms \
		-u "rediss://127.0.0.1:$port" --cacert "$CA" -k hs -- touch ran
	wait_until 20 grep -q '; retrying' "$RLOCK_ERR" || {
		kill -CONT "$pid"
		fail "rlock: $(cat "$RLOCK_ERR")"
	}
	local alive=0
	proc_alive "$RLOCK_PID" && alive=1
	kill -CONT "$pid"
	((alive)) || fail "rlock gave up: $(cat "$RLOCK_ERR")"
	rode_out_outage hs "127\.0\.0\.1:$port" "TLS handshake with 127\.0\.0\.1:$port: timed out after [0-9]+ ms.*" 30
}

@test "--cacert, --cert, --tls-key as a FIFO: 66 at once, never read blocking (issue 33)" {
	mkfifo f.pem
	local opt
	for opt in --cacert --cert --tls-key; do
		local args=(--cacert "$CA")
		case $opt in
		--cacert) args=(--cacert f.pem) ;;
		--cert) args+=(--cert f.pem --tls-key "$TLS_CERTS/client.key") ;;
		--tls-key) args+=(--cert "$TLS_CERTS/client.pem" --tls-key f.pem) ;;
		esac
		# -k: a blocked open() is not ended by SIGTERM alone.
		run --separate-stderr timeout -k 5 20 "$RLOCK" -u "rediss://127.0.0.1:$TLS_B_PORT" "${args[@]}" -k t -- touch ran
		assert_equal "$status" 66
		assert_one_line_error
		assert_regex "$stderr" "$opt: 'f.pem' is not a regular file"
	done
	[[ ! -e ran ]]
}

@test "--cacertdir: a certificate in it that others can write, or a FIFO by its hash name, is refused (66, one line), never trusted or read blocking" {
	# OpenSSL reads HASH.N from the directory when it verifies: a certificate there that
	# another user can write lets them vouch for any server (the password goes to it),
	# and a FIFO by that name blocked rlock in open() for ever (SIGTERM blocked too).
	local hashed
	cp -r "$TLS_CERTS/cadir" d
	chmod 755 d
	hashed=$(cd d && ls -- *.0)
	[[ -L d/$hashed ]] || fail "no hash link in the CA directory: $(ls -l d)"
	chmod 666 d/ca.pem
	run -66 --separate-stderr timeout -k 5 20 "$RLOCK" -u "rediss://127.0.0.1:$TLS_A_PORT" \
		--cacertdir d -k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "^rlock: --cacertdir: 'd/$hashed' is writable by others"
	chmod 644 d/ca.pem
	# a hash name linked to a certificate of another user's, out of the directory
	if ((EUID == 0)); then
		cp "$CA" theirs.pem
		chown nobody theirs.pem
		ln -sfn "$PWD/theirs.pem" "d/$hashed"
		run -66 --separate-stderr timeout -k 5 20 "$RLOCK" -u "rediss://127.0.0.1:$TLS_A_PORT" \
			--cacertdir d -k t -- touch ran
		assert_one_line_error
		assert_regex "$stderr" "^rlock: --cacertdir: 'd/$hashed' belongs to another user"
	fi
	rm "d/$hashed"
	mkfifo "d/$hashed"
	run --separate-stderr timeout -k 5 20 "$RLOCK" -u "rediss://127.0.0.1:$TLS_A_PORT" \
		--cacertdir d -k t -- touch ran
	assert_equal "$status" 66
	assert_one_line_error
	assert_regex "$stderr" "^rlock: --cacertdir: 'd/$hashed' is not a regular file \(a FIFO\)"
	[[ ! -e ran ]]
	# what is not a name OpenSSL reads is not looked at; the directory as made works
	rm "d/$hashed"
	ln -s ca.pem "d/$hashed"
	mkfifo d/README
	run -0 --separate-stderr timeout -k 5 20 "$RLOCK" -u "rediss://127.0.0.1:$TLS_A_PORT" \
		--cacertdir d -k t -- touch ran
	[[ -e ran ]]
}

@test "--acquire with a relative SSL_CERT_FILE or SSL_CERT_DIR (no --cacert): the keeper (in /) still finds the trust store, renews and releases" {
	cp "$CA" ca.pem
	cp -r "$TLS_CERTS/cadir" d
	local u="rediss://127.0.0.1:$TLS_A_PORT" k var
	for var in SSL_CERT_FILE=ca.pem SSL_CERT_DIR=none:d; do
		run -0 --separate-stderr env "$var" "$RLOCK" -u "$u" -t 2s -k kt --acquire
		eval "$output"
		k=$(tls_cli "$TLS_A_PORT" HGET 'rlock:{kt}:owner' pid)
		track_pid "$k"
		# past a lease: renewed by the keeper over its own TLS connections
		renewed_reset
		wait_until 30 renewed 4 'rlock:{kt}' tls_cli "$TLS_A_PORT"
		run -0 --separate-stderr env "$var" "$RLOCK" -u "$u" -k kt --release
		wait_until 20 proc_gone "$k"
	done
}

@test "SSL_CERT_FILE and SSL_CERT_DIR (the system trust store's stand-ins) are held to --cacert's rule: a FIFO, one others can write: 66, one line" {
	# Without --cacert, OpenSSL reads the files these name: a FIFO held rlock in open()
	# for ever (SIGTERM blocked), and a bundle others could write vouched for any server.
	mkfifo ca.fifo
	cp "$CA" ca.pem
	chmod 644 ca.pem
	SSL_CERT_FILE=$PWD/ca.pem run -0 --separate-stderr timeout -k 5 20 "$RLOCK" \
		-u "rediss://127.0.0.1:$TLS_A_PORT" -k t -- true
	SSL_CERT_FILE=$PWD/ca.fifo run --separate-stderr timeout -k 5 20 "$RLOCK" \
		-u "rediss://127.0.0.1:$TLS_A_PORT" -k t -- touch ran
	assert_equal "$status" 66
	assert_one_line_error
	assert_regex "$stderr" "^rlock: SSL_CERT_FILE: '.*/ca.fifo' is not a regular file \(a FIFO\)"
	chmod 666 ca.pem
	SSL_CERT_FILE=$PWD/ca.pem run -66 --separate-stderr timeout -k 5 20 "$RLOCK" \
		-u "rediss://127.0.0.1:$TLS_A_PORT" -k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "^rlock: SSL_CERT_FILE: '.*/ca.pem' is writable by others"
	# a directory of the list others can write (a name added there is trusted); its
	# certificates are not each looked at (a system store holds hundreds)
	cp -r "$TLS_CERTS/cadir" d
	chmod 777 d
	SSL_CERT_DIR=$PWD/none:$PWD/d run -66 --separate-stderr timeout -k 5 20 "$RLOCK" \
		-u "rediss://127.0.0.1:$TLS_A_PORT" -k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "^rlock: SSL_CERT_DIR: '.*/d' is writable by others"
	[[ ! -e ran ]]
	# --cacert given, or --insecure: they are not read, not looked at
	SSL_CERT_FILE=$PWD/ca.fifo run -0 timeout -k 5 20 "$RLOCK" -u "rediss://127.0.0.1:$TLS_A_PORT" \
		--cacert "$CA" -k t -- true
}

@test "RLOCK_TLS_MODULE naming a FIFO or a directory: 66 at once, one line, never opened blocking" {
	# dlopen() opens a FIFO blocking: rlock hung there, SIGTERM blocked, until SIGKILL.
	mkfifo mod.fifo
	mkdir mod.dir
	local m
	for m in mod.fifo mod.dir; do
		RLOCK_TLS_MODULE=$PWD/$m run --separate-stderr timeout -k 5 20 "$RLOCK" \
			-u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$CA" -k t -- touch ran
		assert_equal "$status" 66
		assert_one_line_error
		assert_regex "$stderr" "^rlock: TLS module '.*/$m' (is not a regular file|is a directory)"
	done
	[[ ! -e ran ]]
}

@test "RLOCK_TLS_MODULE not an absolute path: 64 (bad input, as a relative RLOCK_CONFIG), one line, in every mode; a plain URL never reads it" {
	# It was 66, the status of a file that cannot be read, where every other relative
	# path rlock refuses in its environment is a usage error.
	local mod args
	mod=$(dirname "$RLOCK")/rlock-tls.so
	cp "$mod" .
	for args in "-k t -- touch ran" "-k t --status" "--check" "-k t --acquire"; do
		# shellcheck disable=SC2086 # the mode's words
		RLOCK_TLS_MODULE=rlock-tls.so run --separate-stderr rlock \
			-u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$CA" $args
		assert_equal "$status" 64
		assert_one_line_error
		assert_regex "$stderr" "^rlock: RLOCK_TLS_MODULE: 'rlock-tls\.so' is not an absolute path"
	done
	[[ ! -e ran ]]
	RLOCK_TLS_MODULE=rlock-tls.so run -0 rlock -u "redis://127.0.0.1:$REDIS_PORT" -k t -- touch ran
	[[ -e ran ]]
}

@test "the TLS module is refused (66, one line) when another user could have written it or its directory; trusted, it loads" {
	local mod
	mod=$(dirname "$RLOCK")/rlock-tls.so
	[[ -f $mod ]] || fail "no TLS module beside $RLOCK"
	mkdir m
	cp "$mod" m/
	chmod 755 m
	chmod 644 m/rlock-tls.so
	RLOCK_TLS_MODULE=$PWD/m/rlock-tls.so run -0 rlock -u "rediss://127.0.0.1:$TLS_A_PORT" \
		--cacert "$CA" -k t -- touch ran
	[[ -e ran ]] && rm ran
	chmod 666 m/rlock-tls.so
	RLOCK_TLS_MODULE=$PWD/m/rlock-tls.so run -66 --separate-stderr rlock \
		-u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$CA" -k t -- touch ran
	assert_regex "$stderr" "^rlock: TLS module '.*/m/rlock-tls.so' is writable by others"
	((${#stderr_lines[@]} == 1)) || fail "more than one line: $stderr"
	[[ ! -e ran ]]
	# its directory: others could replace it
	chmod 644 m/rlock-tls.so
	chmod 777 m
	RLOCK_TLS_MODULE=$PWD/m/rlock-tls.so run -66 --separate-stderr rlock \
		-u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$CA" -k t -- touch ran
	assert_regex "$stderr" "^rlock: TLS module .* which is writable by others"
	[[ ! -e ran ]]
	chmod 755 m
	# the module found beside the executable is held to the same rule
	mkdir exe
	cp "$RLOCK" "$mod" exe/
	chmod 666 exe/rlock-tls.so
	run -66 --separate-stderr env -u RLOCK_TLS_MODULE exe/rlock \
		-u "rediss://127.0.0.1:$TLS_A_PORT" --cacert "$CA" -k t -- touch ran
	assert_regex "$stderr" "^rlock: TLS module '.*/exe/rlock-tls.so' is writable by others"
	[[ ! -e ran ]]
}

@test "no TLS module beside the binary nor installed: 71 (this host cannot do it), one line, not 69; in every mode and topology" {
	# An installation fault of this host: the server was never asked (exitcodes.h).
	# --check called it "unreachable" (69), a Redlock run waited for a quorum for ever
	# and its --list said 69: the module is loaded before any mode starts.
	mkdir bare
	cp "$RLOCK" bare/
	local a="rediss://127.0.0.1:$TLS_A_PORT" tok=0123456789abcdef0123456789abcdef
	local redlock="$a,rediss://127.0.0.2:$TLS_A_PORT,rediss://localhost:$TLS_A_PORT"
	local mode
	for mode in "$a -k t -- touch ran" "$a -k t -n -- touch ran" "$a -k t --status" \
		"$a -k t --break" "$a --check" "$a --list" "$a -k t --reset" \
		"$a -k t --held --token $tok" "$a -k t --history" \
		"rediss-sentinel://127.0.0.1:$TLS_A_PORT/m --check" \
		"$redlock --check" "$redlock --list" "$redlock -k t -n -- touch ran"; do
		# shellcheck disable=SC2086 # the mode's words
		run --separate-stderr env -u RLOCK_TLS_MODULE timeout -k 5 20 bare/rlock \
			--cacert "$CA" --connect-timeout 2s -u $mode
		assert_equal "$status" 71
		assert_one_line_error
		assert_regex "$stderr" "^rlock: .*TLS support is not available"
		assert_equal "$output" ""
	done
	# --acquire says it in the form eval reads, and starts no keeper
	run --separate-stderr env -u RLOCK_TLS_MODULE timeout -k 5 20 bare/rlock \
		--cacert "$CA" -u "$a" -k t --acquire
	assert_equal "$status" 71
	assert_one_line_error
	assert_output --partial '(exit 71)'
	[[ ! -e ran ]]
	assert_equal "$(tls_cli "$TLS_A_PORT" EXISTS 'rlock:{t}')" 0
}

@test "a --cacert, --cert or --tls-key that is not PEM of its kind: 66, one line naming the file, in every mode and topology (not 69 nor a network fix)" {
	# The module read the file but found no certificate or key in it: the user's file,
	# as one that cannot be read (exitcodes.h), not an unavailable server; -w does not
	# wait for it, --check's finding says which file to fix.
	printf 'not a certificate\n' >bad.pem
	chmod 600 bad.pem
	local a="rediss://127.0.0.1:$TLS_A_PORT" tok=0123456789abcdef0123456789abcdef
	local redlock="$a,rediss://127.0.0.2:$TLS_A_PORT,rediss://localhost:$TLS_A_PORT"
	local sentinel="rediss-sentinel://127.0.0.1:$TLS_A_PORT/m"
	local mode files
	for mode in "$a -k t -- touch ran" "$a -k t -w 20s -- touch ran" "$a -k t --status" \
		"$a --list" "$a -k t --held --token $tok" "$sentinel -k t -n -- touch ran" \
		"$redlock -k t -w 20s -- touch ran"; do
		for files in "--cacert bad.pem" "--cacert $CA --cert bad.pem --tls-key bad.pem" \
			"--cacert $CA --cert $TLS_CERTS/client.pem --tls-key bad.pem"; do
			# shellcheck disable=SC2086 # the mode's and the files' words
			run --separate-stderr timeout -k 5 20 "$RLOCK" $files --connect-timeout 2s -u $mode
			assert_equal "$status" 66
			assert_one_line_error
			assert_regex "$stderr" "^rlock: .*TLS: cannot load .*bad.pem"
		done
	done
	for mode in "$a" "$sentinel" "$redlock"; do
		run --separate-stderr timeout -k 5 20 "$RLOCK" --cacert bad.pem --connect-timeout 2s \
			-u "$mode" --check
		assert_equal "$status" 66
		assert_output --partial 'bad.pem: no certificate in it; fix: give --cacert'
		assert_output --partial 'verdict: bad-file'
		refute_output --partial 'the network'
	done
	run --separate-stderr timeout -k 5 20 "$RLOCK" --cacert bad.pem -u "$a" -k t --acquire
	assert_equal "$status" 66
	assert_output --partial '(exit 66)'
	[[ ! -e ran ]]
	# a directory of CA certificates given as the bundle: the line names --cacertdir
	run -66 --separate-stderr rlock --cacert "$TLS_CERTS/cadir" -u "$a" -k t -- touch ran
	assert_one_line_error
	assert_regex "$stderr" "^rlock: --cacert: '.*/cadir' is a directory \(a directory of CA certificates: --cacertdir\)$"
	[[ ! -e ran ]]
	assert_equal "$(tls_cli "$TLS_A_PORT" EXISTS 'rlock:{t}')" 0
}
