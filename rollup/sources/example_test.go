package sources_test

import (
	"fmt"

	"github.com/waymark/waymark/rollup/sources"
)

func Example() {
	// At fold time: a visit's first pageview.
	src := sources.Source("m.facebook.com", "")
	fmt.Println(src, "/", sources.Channel(src, sources.UTM{}, ""))

	src = sources.Source("www.google.com", "google")
	fmt.Println(src, "/", sources.Channel(src, sources.UTM{Source: "google", Medium: "cpc"}, ""))

	src = sources.Source("", "")
	fmt.Println(sources.Label("visit:source", src), "/", sources.Channel(src, sources.UTM{}, ""))

	// At query time: a filter visit:source is "Direct / None".
	fmt.Printf("%q\n", sources.StoredValue("visit:source", sources.DirectNone))
	// Output:
	// Facebook / Organic Social
	// Google / Paid Search
	// Direct / None / Direct
	// ""
}
