// Command shindo-dataapi runs svc-dataapi, a core's public data API.
package main

import (
	"os"

	"shindo.dev/lib/service"
	dataapi "shindo.dev/svc-dataapi"
)

func main() {
	cfg := dataapi.DefaultConfig()
	os.Exit(service.Main(dataapi.Name, "DATAAPI", &cfg, dataapi.Run))
}
