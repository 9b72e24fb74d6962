package sdk_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"shindo.dev/sdk"
)

// Two entrances: the first is failing (503), so the client moves to the
// second and stays there.
func ExampleClient_RTS() {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"station":{"SIM00001":{"pga":1.2,"pgv":0.1,"i":0.8,"I":0.9}},"box":{},"int":[],"time":1800000000000}`)
	}))
	defer up.Close()

	client, err := sdk.New([]string{down.URL, up.URL})
	if err != nil {
		panic(err)
	}
	rts, err := client.RTS(context.Background())
	if err != nil {
		panic(err)
	}
	fmt.Println(rts.Time, rts.Station["SIM00001"].I, client.Base() == up.URL)
	// Output: 1800000000000 0.8 true
}

// A 404 is the caller's mistake: the client does not move.
func ExampleClient_Get() {
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()

	client, _ := sdk.New([]string{missing.URL, other.URL})
	err := client.Get(context.Background(), "/api/v2/eq/report/nope", nil)
	fmt.Println(err != nil, client.Base() == missing.URL)
	// Output: true true
}
