package fdsnstation

import (
	"fmt"
	"net/http"

	"shindo.dev/svc-dataapi/internal/fdsn"
)

// WADL is the service's description with base as its address.
func WADL(base string) string { return spec.WADL(base, "application/xml", "text/plain") }

// usage is the page errors point to: what the service answers.
func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	base := fdsn.Scheme(r) + "://" + r.Host + Base
	fmt.Fprintf(w, `fdsnws-station %s (FDSN Web Service Specifications 1.2): station metadata of this network.

%squery?net=SH&sta=*&level=channel&format=xml   StationXML 1.2; format=text for the text format
%squery (POST)   a selection per line: NET STA LOC CHA START END
%sversion
%sapplication.wadl

Parameters: see application.wadl. Codes take * and ? and comma-separated lists (-- for an empty
location); times are UTC, YYYY-MM-DDThh:mm:ss[.ssssss]; nodata=204 (default) or 404.
`, Version, base, base, base, base)
}
