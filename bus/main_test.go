package bus

import (
	"flag"
	"runtime"
	"strconv"
	"testing"
)

// testParallel is how many of this package's tests run at once unless
// -parallel says otherwise. They mostly wait (ack waits, elections,
// heartbeats, a server's write deadline) with the CPU idle, so more of
// them than go test's default (one per CPU) run together; each has its
// own servers, store directories and ports (freePorts).
const testParallel = 8

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(max(testParallel, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	m.Run()
}
