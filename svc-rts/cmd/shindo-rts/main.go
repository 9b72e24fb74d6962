// Command shindo-rts runs svc-rts, a core's real-time shaking service.
package main

import (
	"os"

	"shindo.dev/lib/service"
	rts "shindo.dev/svc-rts"
)

func main() {
	cfg := rts.DefaultConfig()
	os.Exit(service.Main(rts.Name, "RTS", &cfg, rts.Run))
}
