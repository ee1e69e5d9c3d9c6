#!/usr/bin/perl
# The one fake server of the test suite: a hostile "Redis" that answers the first
# request with a bad reply, to prove rlock fails cleanly (exit 69, one line, command
# never run, memory bounded). Bounded: serves at most 5 connections, exits after 20 s.
#   hostile-server.pl PORT MODE READYFILE
# bulkhang and resp3hang send a header no Redis sends rlock (a bulk of 2^63 - 2 bytes,
# a RESP3 map) and then nothing, the connection open.
# Three modes answer every request on every connection (up to 20 s):
#   busy  the acquire script's "busy" reply, with PTTL $HOSTILE_PTTL (default
#         INT64_MAX) and holder pid $HOSTILE_PID; each acquire request adds a line
#         to READYFILE.count (how often rlock tried)
#   scan  a SCAN reply whose cursor never returns to 0 (each SCAN adds a line to
#         READYFILE.count too)
#   escape  an error whose text holds terminal escapes (the %reply below)
#   longerr  an error whose text (813 bytes, mostly 2-byte UTF-8) ends in END-OF-REASON
#   loadescape  LOADING (a state that passes: a waiter retries) whose text holds
#         terminal escapes
#   scanbreak  a SCAN's first page (cursor 1, no names), then an error for every SCAN
#         that goes on from a cursor: a server that fails mid-SCAN, after its first page
#   busymute  busy for every acquire (EVAL...); no answer to anything else (a
#         waiter's SUBSCRIBE or BLPOP: a server that stalls once the lock is busy)
#   busysplit  busy for every acquire; a waiter's SUBSCRIBE is confirmed (each channel)
#         and followed by the first bytes of a message, its BLPOP answered with the
#         first bytes of a reply, and nothing more (a server or a network that stalls in
#         the middle of a notification); HOSTILE_PLACED=1: the busy reply gives the
#         waiter a place among the waiters (it blocks in BLPOP)
#   busyclose  the first request of all: the busy reply, then the connection closed;
#         every later connection closed at its first request, before a byte of reply
#         (a server that spoke RESP to this run, then fails: no TLS port)
# halfclose answers the first request with the first half of a reply, then closes.
use strict;
use warnings;
use IO::Socket::INET;

my ($port, $mode, $ready) = @ARGV;
my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
	Proto => 'tcp', Listen => 5, ReuseAddr => 1) or die "listen: $!";
open(my $fh, '>', $ready) or die; close $fh;
$SIG{ALRM} = sub { exit 0 };
$SIG{PIPE} = 'IGNORE';
alarm 20;

my %reply = (
	garbage => "hello world\r\n",
	extra   => ":1\r\n:1\r\n",
	status  => "+OK\r\n",
	deep    => ("*1\r\n" x 12) . ":1\r\n",
	# 262 000 levels, just under rlock's 1 MiB reply cap: hiredis 1.0-1.4 has no
	# nesting limit and frees replies recursively (a stack overflow)
	verydeep => ("*1\r\n" x 262000) . ":1\r\n",
	noauth  => "-NOAUTH Authentication required.\r\n",
	badcrlf => "\$3\r\nabcXY:1\r\n",
	http    => "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
	tlsalert => "\x15\x03\x03\x00\x02\x02\x32",    # a TLS port's answer to plain text
	# an error text with a terminal escape, a C1 CSI (raw, and as UTF-8) and a CI
	# runner's command (GitHub reads "##[" anywhere in a line)
	escape  => "-ERR \e[31mred\e]0;title\a \x9b2J \xc2\x9b ##[add-mask]rlock\r\n",
	loadescape => "-LOADING \e[31mred\e]0;title\a \x9b2J\r\n",
	# an error text longer than any buffer rlock copies it into, its UTF-8 (e with an
	# acute accent, 2 bytes) spread so that any cut lands inside one, its end the reason
	longerr => "-ERR " . ("\xc3\xa9" x 400) . " END-OF-REASON\r\n",
);

if ($mode eq 'busy' || $mode eq 'scan' || $mode eq 'escape' || $mode eq 'scanbreak' ||
	$mode eq 'loadescape' || $mode eq 'busyclose' || $mode eq 'busymute' ||
	$mode eq 'busysplit' || $mode eq 'longerr') {
	require IO::Select;
	my $pttl = $ENV{HOSTILE_PTTL} // '9223372036854775807';
	my $pid = $ENV{HOSTILE_PID} // '4242';
	my $bulk = sub { my $v = shift; '$' . length($v) . "\r\n$v\r\n" };
	my $placed = $ENV{HOSTILE_PLACED} ? 2 : 0;
	my $busy = "*9\r\n:$placed\r\n:$pttl\r\n" . join('', map { $bulk->($_) }
		('evil.example', $pid, 'mallory', 'sleep forever', '1700000000000', '30000', '7'));
	my $scan = "*2\r\n" . $bulk->('1') . "*0\r\n";
	my $sel = IO::Select->new($srv);
	my $answered = 0;
	for (;;) {
		for my $h ($sel->can_read(1)) {
			if ($h == $srv) {
				my $c = $srv->accept or next;
				$sel->add($c) if $sel->count < 20;
				next;
			}
			my $n = $h->sysread(my $buf, 65536);
			if (!$n) {
				$sel->remove($h);
				close $h;
				next;
			}
			if ($buf =~ /EVAL|SCAN/) {
				open(my $cf, '>>', "$ready.count") or die;
				print $cf "x\n";
				close $cf;
			}
			# a standalone server's answer to --list's cluster probe
			if ($buf =~ /CLUSTER/) {
				$h->syswrite("-ERR This instance has cluster support disabled\r\n");
				next;
			}
			if ($mode eq 'busymute') {
				$h->syswrite($busy) if $buf =~ /EVAL/;
				next;
			}
			if ($mode eq 'busysplit') {
				if ($buf =~ /^\*(\d+)\r\n\$9\r\nSUBSCRIBE/i) {
					$h->syswrite(("*3\r\n\$9\r\nsubscribe\r\n\$1\r\nc\r\n:1\r\n" x ($1 - 1)) .
						"*3\r\n\$7\r\nmess");
				} elsif ($buf =~ /BLPOP/) {
					$h->syswrite("*2\r\n\$");
				} elsif ($buf =~ /EVAL/) {
					$h->syswrite($busy);
				}
				next;
			}
			if ($mode eq 'busyclose') {
				$h->syswrite($busy) if !$answered++;
				$sel->remove($h);
				close $h;
				next;
			}
			if ($mode eq 'scanbreak') {
				my ($cursor) = $buf =~ /SCAN\r\n\$\d+\r\n(\d+)\r\n/;
				$h->syswrite(!defined $cursor ? "-ERR not SCAN\r\n"
					: $cursor eq '0' ? $scan : "-ERR injected: the server failed mid-SCAN\r\n");
				next;
			}
			$h->syswrite($mode eq 'scan' ? $scan : $mode eq 'busy' ? $busy : $reply{$mode});
		}
	}
}

for (1 .. 5) {
	my $c = $srv->accept or next;
	my $buf = '';
	$c->sysread($buf, 65536);    # the request, whatever it is
	if ($mode eq 'close') {
		close $c;
		next;
	}
	if ($mode eq 'halfclose') {
		$c->syswrite("*2\r\n:1\r\n");    # a reply's first element, then the end
		close $c;
		next;
	}
	if ($mode eq 'hang') {
		sleep 5;
		close $c;
		next;
	}
	if ($mode eq 'bulkhang' || $mode eq 'resp3hang') {
		# A reply no Redis sends rlock, then nothing (the connection left open): a
		# bulk of 2^63 - 2 bytes, or a RESP3 map on a RESP2 connection. Waiting for
		# the rest would look like a slow server.
		$c->syswrite($mode eq 'bulkhang' ? "\$9223372036854775806\r\n" : "%1\r\n");
		sleep 19;
		close $c;
		next;
	}
	if ($mode eq 'bigbulk' || $mode eq 'bigarray') {
		# A header announcing an enormous reply, then bytes until the client hangs
		# up: 8 MiB at most.
		$c->syswrite($mode eq 'bigbulk' ? "\$9223372036854775806\r\n" : "*2147483647\r\n");
		my $chunk = ($mode eq 'bigbulk' ? 'a' : "\$1\r\na\r\n") x 8192;
		for (1 .. 1024) {
			last unless defined $c->syswrite($chunk);
		}
		close $c;
		next;
	}
	$c->syswrite($reply{$mode} // die "unknown mode $mode");
	sleep 2;    # keep the connection open: rlock must not wait for more
	close $c;
}
