// Command shindo-waveform runs svc-waveform, a core's waveform service.
package main

import (
	"os"

	"shindo.dev/lib/service"
	waveform "shindo.dev/svc-waveform"
)

func main() {
	cfg := waveform.DefaultConfig()
	os.Exit(service.Main(waveform.Name, "WAVEFORM", &cfg, waveform.Run))
}
