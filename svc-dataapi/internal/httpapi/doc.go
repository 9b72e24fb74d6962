// Package httpapi is the HTTP side of the data API around grpc-gateway:
// strict query parameters, conditional GETs (ETag, If-None-Match), the
// guard in front of every route (credentials, rate limits, body size), and
// the fast JSON of its busiest answers. Errors are written by
// lib/apierror, as every REST server of shindo writes them.
package httpapi
