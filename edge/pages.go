package edge

import (
	"html"
	"strings"
)

// The pages are plain HTML with inline style and no script: they must work
// everywhere, and the strict Content-Security-Policy sent with them (see
// writePage) would refuse anything else.

func page(title, body string) []byte { return pageWithHead(title, "", body) }

// pageWithHead is page with more elements in <head> (already escaped):
// the preview's meta tags (preview.go).
func pageWithHead(title, head, body string) []byte {
	var b strings.Builder
	b.WriteString(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>`)
	b.WriteString(html.EscapeString(title))
	b.WriteString("</title>\n")
	b.WriteString(head)
	b.WriteString(`<style>
body{font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#1f2328}
h1{font-size:1.5em;margin-bottom:.5em}
.host{font-family:ui-monospace,monospace;background:#f3f4f6;padding:.1em .3em;border-radius:3px;word-break:break-all}
.button{display:inline-block;margin-top:1em;padding:.6em 1.2em;background:#1f6feb;color:#fff;border-radius:6px;text-decoration:none}
.warning{border-left:4px solid #cf222e;padding-left:1em}
input,button{font:inherit;padding:.5em .7em;border-radius:6px}
input{border:1px solid #8c959f;width:100%;box-sizing:border-box;margin:.3em 0 .8em}
button{border:0;background:#1f6feb;color:#fff;cursor:pointer}
</style>
</head>
<body>
<h1>`)
	b.WriteString(html.EscapeString(title))
	b.WriteString("</h1>\n")
	b.WriteString(body)
	b.WriteString("\n</body>\n</html>\n")
	return []byte(b.String())
}

var (
	pageNotFound = page("Link not found",
		`<p>There is no short link at this address. Check that it was copied completely.</p>`)
	pageGone = page("Link no longer available",
		`<p>This short link has expired, reached its click limit, or was disabled by its owner.</p>`)
	pageLegal = page("Unavailable for legal reasons",
		`<p>This short link has been blocked in response to a legal demand.</p>`)
	pageError = page("Something went wrong",
		`<p>The link could not be looked up. Please try again in a moment.</p>`)
	pageMethod = page("Method not allowed",
		`<p>Short links answer GET and HEAD only.</p>`)
	pageUnknownHost = page("Not found",
		`<p>This address does not serve short links.</p>`)
)

// blockedPage names the destination host so the visitor knows what was
// stopped, but deliberately contains no link to it.
func blockedPage(host string) []byte {
	return page("Warning: this link has been blocked",
		`<div class="warning"><p>This short link leads to <span class="host">`+html.EscapeString(host)+
			`</span>, which has been reported as harmful (for example phishing or malware).</p>`+
			`<p>Waymark has blocked it to protect you. There is no way to continue from this page.</p></div>`)
}

// reviewPage is the interstitial for a link under review: the visitor sees
// where it goes and decides.
func reviewPage(host, url string) []byte {
	h := html.EscapeString(host)
	return page("Check before you continue",
		`<p>This short link is under review. It leads to <span class="host">`+h+`</span>.</p>`+
			`<p>Continue only if you trust this site.</p>`+
			`<p><a class="button" href="`+html.EscapeString(url)+`" rel="noreferrer nofollow">Continue to `+h+`</a></p>`)
}
