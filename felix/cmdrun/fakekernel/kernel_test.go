package fakekernel

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/cmdrun"
)

func run(k *Kernel, name, stdin string, args ...string) error {
	_, err := k.Run(context.Background(), name, args, []byte(stdin))
	return err
}

// The fake refuses what the real kernel refuses, so writer tests against it mean something.
func TestRefusesLikeTheKernel(t *testing.T) {
	k := New()
	for _, c := range []struct {
		name, stdin string
		args        []string
		want        string // "" = must succeed
	}{
		{"iptables-nft-restore", "*filter\n-A FORWARD -j tabby-missing\nCOMMIT\n", []string{"--noflush"}, "line 2 failed: Couldn't load target `tabby-missing'"},
		{"iptables-nft-restore", "*filter\n-A FORWARD -m set --match-set s src -j DROP\nCOMMIT\n", []string{"--noflush"}, "Set s doesn't exist"},
		{"ipset", "create s hash:net family inet\nadd s 10.0.0.0/8\nadd s 10.1.0.0/16 nomatch\n", []string{"restore"}, ""},
		{"ipset", "add s 10.0.0.0/8\n", []string{"restore"}, "Error in line 1: Element cannot be added to the set: it's already added"},
		{"ipset", "create t hash:ip\nswap t s\n", []string{"restore"}, "Error in line 2: The sets cannot be swapped"},
		{"iptables-nft-restore", "*filter\n:tabby-a - [0:0]\n-A tabby-a -m set --match-set s src -j DROP\n-I FORWARD 1 -j tabby-a\nCOMMIT\n", []string{"--noflush"}, ""},
		{"ipset", "destroy s\n", []string{"restore"}, "in use by a kernel component"},
		{"iptables-nft-restore", "*filter\n-X tabby-a\nCOMMIT\n", []string{"--noflush"}, "Directory not empty"},
		{"iptables-nft-restore", "*filter\n:tabby-a - [0:0]\n-X tabby-a\nCOMMIT\n", []string{"--noflush"}, "Device or resource busy"},
		{"iptables-nft-restore", "*filter\n:tabby-a - [0:0]\n-D FORWARD -j tabby-a\n-X tabby-a\nCOMMIT\n", []string{"--noflush"}, ""},
		{"ipset", "destroy s\n", []string{"restore"}, ""},
	} {
		err := run(k, c.name, c.stdin, c.args...)
		switch {
		case c.want == "" && err != nil:
			t.Fatalf("%s %q: %v", c.name, c.stdin, err)
		case c.want != "" && (err == nil || !strings.Contains(cmdrun.Stderr(err), c.want)):
			t.Fatalf("%s %q: %v, want %q", c.name, c.stdin, err, c.want)
		}
	}
	// A failed restore changes nothing (each table commits all or nothing).
	if err := run(k, "iptables-nft-restore", "*filter\n:tabby-b - [0:0]\n-A tabby-b -j nowhere\nCOMMIT\n", "--noflush"); err == nil {
		t.Fatal("jump to a missing chain accepted")
	}
	if _, ok := k.Chains("iptables-nft", "filter")["tabby-b"]; ok {
		t.Fatal("a failed restore left a chain")
	}
}

func TestCallsAndFailures(t *testing.T) {
	k := New()
	k.Fail(Failure{Name: "ipset", Contains: "tabby-x", Times: 2, ExitCode: 3, Stderr: "boom"})
	for i := 0; i < 3; i++ {
		err := run(k, "ipset", "create tabby-x hash:ip\n", "restore")
		var ce *cmdrun.Error
		if i < 2 && (!errors.As(err, &ce) || ce.ExitCode != 3 || ce.Stderr != "boom") {
			t.Fatalf("call %d: %v, want the injected failure", i, err)
		}
		if i == 2 && err != nil {
			t.Fatalf("after the failures: %v", err)
		}
	}
	if n := len(k.CallsTo("ipset")); n != 3 {
		t.Fatalf("%d calls recorded", n)
	}
	if out, _ := k.Run(context.Background(), "iptables", []string{"--version"}, nil); !strings.Contains(string(out), "nf_tables") {
		t.Fatalf("version %q", out)
	}
	if got := k.Sets()["tabby-x"]; got.Type != "hash:ip" || !slices.Equal(got.Members, nil) {
		t.Fatalf("set %+v", got)
	}
}
