package main

import (
	"errors"
	"net"

	"github.com/flockrun/flock/audit/probe"
)

// echoServe answers on ADDR over UDP and TCP with what it got: a stand-in
// for a resolver, so that a query from root is answered and one from an
// agent tells the firewall's refusal from a silent port.
func echoServe(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: probe echo-serve ADDR")
	}
	pc, err := net.ListenPacket("udp", args[0])
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", args[0])
	if err != nil {
		return err
	}
	go probe.EchoTCP(ln, "")
	probe.EchoUDP(pc, "")
	return errors.New("echo-serve: the UDP socket closed")
}
