#!/usr/bin/perl
# The one fake server of the test suite: a hostile "Redis" that answers the first
# request with a bad reply, to prove rlock fails cleanly (exit 69, one line, command
# never run, memory bounded). Bounded: serves at most 5 connections, exits after 20 s.
#   hostile-server.pl PORT MODE READYFILE
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
	noauth  => "-NOAUTH Authentication required.\r\n",
	badcrlf => "\$3\r\nabcXY:1\r\n",
	tlsalert => "\x15\x03\x03\x00\x02\x02\x32",    # a TLS port's answer to plain text
);

for (1 .. 5) {
	my $c = $srv->accept or next;
	my $buf = '';
	$c->sysread($buf, 65536);    # the request, whatever it is
	if ($mode eq 'close') {
		close $c;
		next;
	}
	if ($mode eq 'hang') {
		sleep 5;
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
