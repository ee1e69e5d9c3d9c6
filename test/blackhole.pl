#!/usr/bin/perl
# A TCP port where connect() hangs: a listener whose accept queue is full and never
# drained, so the kernel drops new SYNs. Bounded: exits after 30 s.
#   blackhole.pl PORT READYFILE [ADDRESS]   (ADDRESS: 127.0.0.1 unless given, e.g. ::1)
use strict;
use warnings;
use IO::Socket::IP;

my ($port, $ready, $addr) = @ARGV;
$addr //= '127.0.0.1';
my $l = IO::Socket::IP->new(LocalHost => $addr, LocalPort => $port, Proto => 'tcp',
	Listen => 1, ReuseAddr => 1) or die "listen: $!";
# Fill the accept queue until a probe connect times out (at most 64 tries).
my @fill;
for (1 .. 64) {
	my $s = IO::Socket::IP->new(PeerHost => $addr, PeerPort => $port, Proto => 'tcp',
		Timeout => 0.3);
	last unless $s;
	push @fill, $s;
}
open(my $fh, '>', $ready) or die; close $fh;
$SIG{ALRM} = sub { exit 0 };
alarm 30;
sleep 30;
