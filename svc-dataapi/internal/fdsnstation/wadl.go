package fdsnstation

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"

	"shindo.dev/svc-dataapi/internal/fdsn"
)

// wadl describes the service in WADL (wadl.dev.java.net/2009/02), as the
// specifications ask: clients discover from it which parameters a service
// takes (ObsPy's FDSN client does, before its first query).
func (h *Handler) wadl(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/xml")
	fmt.Fprint(w, WADL(scheme(r)+"://"+r.Host+Base))
}

// WADL is the service's description with base as its address.
func WADL(base string) string {
	var params strings.Builder
	for _, p := range spec.Params {
		typ := map[fdsn.Kind]string{fdsn.Time: "xs:dateTime", fdsn.Float: "xs:double", fdsn.Int: "xs:int", fdsn.Bool: "xs:boolean"}[p.Kind]
		if typ == "" {
			typ = "xs:string"
		}
		fmt.Fprintf(&params, `        <param name="%s" style="query" type="%s"`, p.Name, typ)
		if p.Default != "" {
			fmt.Fprintf(&params, ` default="%s"`, p.Default)
		}
		if len(p.Options) == 0 {
			params.WriteString("/>\n")
			continue
		}
		params.WriteString(">\n")
		for _, o := range p.Options {
			fmt.Fprintf(&params, "          <option value=\"%s\"/>\n", o)
		}
		params.WriteString("        </param>\n")
	}
	var b strings.Builder
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, `<application xmlns="http://wadl.dev.java.net/2009/02" xmlns:xs="http://www.w3.org/2001/XMLSchema">
  <resources base="%s">
    <resource path="query">
      <method name="GET" id="query">
        <request>
%s        </request>
        <response status="200">
          <representation mediaType="application/xml"/>
          <representation mediaType="text/plain"/>
        </response>
        <response status="204 400 404 413 414 500 503">
          <representation mediaType="text/plain"/>
        </response>
      </method>
      <method name="POST" id="postQuery">
        <request>
          <representation mediaType="text/plain"/>
        </request>
        <response status="200">
          <representation mediaType="application/xml"/>
          <representation mediaType="text/plain"/>
        </response>
        <response status="204 400 404 413 500 503">
          <representation mediaType="text/plain"/>
        </response>
      </method>
    </resource>
    <resource path="version">
      <method name="GET">
        <response><representation mediaType="text/plain"/></response>
      </method>
    </resource>
    <resource path="application.wadl">
      <method name="GET">
        <response><representation mediaType="application/xml"/></response>
      </method>
    </resource>
  </resources>
</application>
`, xmlEscape(base), params.String())
	return b.String()
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// usage is the page errors point to: what the service answers.
func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	base := scheme(r) + "://" + r.Host + Base
	fmt.Fprintf(w, `fdsnws-station %s (FDSN Web Service Specifications 1.2): station metadata of this network.

%squery?net=SH&sta=*&level=channel&format=xml   StationXML 1.2; format=text for the text format
%squery (POST)   a selection per line: NET STA LOC CHA START END
%sversion
%sapplication.wadl

Parameters: see application.wadl. Codes take * and ? and comma-separated lists (-- for an empty
location); times are UTC, YYYY-MM-DDThh:mm:ss[.ssssss]; nodata=204 (default) or 404.
`, Version, base, base, base, base)
}
