package netnsfwd

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestSetDelay: with a delay, a client's data reaches the target no earlier than the delay after
// it was sent, in order and whole; the target's answers are not held; zero relays at once again.
func TestSetDelay(t *testing.T) {
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := Serve(ln, target.Addr().String())
	defer f.Close()
	c, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg []byte) time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("echo differs from what was sent (%d bytes)", len(msg))
		}
		return time.Since(start)
	}
	roundTrip([]byte("warm"))
	const d = 300 * time.Millisecond
	f.SetDelay(d)
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // more than one chunk
	if took := roundTrip(big); took < d {
		t.Errorf("with a delay of %s a round trip took %s", d, took)
	} else {
		t.Logf("delay %s: a round trip of %d bytes took %s", d, len(big), took.Round(time.Millisecond))
	}
	f.SetDelay(0)
	// No bound on the machine's speed: only that a round trip no longer waits for the delay
	// after a few tries.
	for i := 0; ; i++ {
		if took := roundTrip([]byte("fast")); took < d {
			break
		} else if i == 10 {
			t.Fatalf("delay removed, round trips still take %s", took)
		}
	}
}
