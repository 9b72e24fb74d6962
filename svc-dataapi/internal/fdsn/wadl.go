package fdsn

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"

	"shindo.dev/svc-dataapi/internal/httpapi"
)

// WADL describes a service in WADL (wadl.dev.java.net/2009/02), as the
// specifications ask: clients discover from it which parameters a service
// takes (ObsPy's FDSN client does, before its first query). base is the
// service's address; media are the media types of its answers.
func (s *Spec) WADL(base string, media ...string) string {
	var params strings.Builder
	for _, p := range s.Params {
		if p.Unlisted {
			continue
		}
		typ := map[Kind]string{Time: "xs:dateTime", Float: "xs:double", Int: "xs:int", Bool: "xs:boolean"}[p.Kind]
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
	var reps strings.Builder
	for _, m := range media {
		fmt.Fprintf(&reps, "          <representation mediaType=\"%s\"/>\n", m)
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
%s        </response>
        <response status="204 400 404 413 414 500 503">
          <representation mediaType="text/plain"/>
        </response>
      </method>
      <method name="POST" id="postQuery">
        <request>
          <representation mediaType="text/plain"/>
        </request>
        <response status="200">
%s        </response>
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
`, xmlEscape(base), params.String(), reps.String(), reps.String())
	return b.String()
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// Scheme is the scheme a request came by, for the addresses the services
// write into their answers (httpapi.Scheme: the edge's, through one).
func Scheme(r *http.Request) string { return httpapi.Scheme(r) }

// Describe adds a service's version and application.wadl routes under
// base to mux: the two every FDSN client asks before its first query.
func (s *Spec) Describe(mux *http.ServeMux, base, version string, media ...string) {
	mux.HandleFunc("GET "+base+"version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(version))
	})
	mux.HandleFunc("GET "+base+"application.wadl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(s.WADL(Scheme(r)+"://"+r.Host+base, media...)))
	})
}
