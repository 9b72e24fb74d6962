// Command shindo-ingest runs svc-ingest, a core's station uplink terminator.
package main

import (
	"os"

	"shindo.dev/lib/service"
	ingest "shindo.dev/svc-ingest"
)

func main() {
	cfg := ingest.DefaultConfig()
	os.Exit(service.Main(ingest.Name, "INGEST", &cfg, ingest.Run))
}
