// Command shindo-edge runs svc-edge, an entrance serving SSE and the compatible routes.
package main

import (
	"os"

	"shindo.dev/lib/service"
	edge "shindo.dev/svc-edge"
)

func main() {
	cfg := edge.DefaultConfig()
	os.Exit(service.Main(edge.Name, "EDGE", &cfg, edge.Run))
}
