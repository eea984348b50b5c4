package edge

import (
	"bytes"
	"fmt"
	"image/png"
	"regexp"
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"
)

func qrArgs(q string) *fasthttp.Args {
	var a fasthttp.Args
	a.Parse(q)
	return &a
}

func TestParseQROptions(t *testing.T) {
	for _, c := range []struct {
		q      string
		ok     bool
		svg    bool
		size   int
		margin int
		level  byte
	}{
		{"", true, false, 512, 4, 'M'},
		{"format=svg&size=32&margin=0&ecc=h", true, true, 32, 0, 'H'},
		{"format=png&size=2048&margin=16&ecc=L", true, false, 2048, 16, 'L'},
		{"format=gif", false, false, 0, 0, 0},
		{"size=31", false, false, 0, 0, 0},
		{"size=2049", false, false, 0, 0, 0},
		{"size=1e3", false, false, 0, 0, 0},
		{"margin=17", false, false, 0, 0, 0},
		{"margin=-1", false, false, 0, 0, 0},
		{"ecc=X", false, false, 0, 0, 0},
		{"ecc=", true, false, 512, 4, 'M'},
	} {
		o, err := parseQROptions(qrArgs(c.q))
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v; want ok=%v", c.q, err, c.ok)
			continue
		}
		if c.ok && (o.svg != c.svg || o.size != c.size || o.margin != c.margin || o.level != c.level) {
			t.Errorf("%q: got svg=%v size=%d margin=%d level=%c; want %v %d %d %c", c.q, o.svg, o.size, o.margin, o.level, c.svg, c.size, c.margin, c.level)
		}
	}
}

// The PNG and the SVG of the same options put every module on the same
// pixels: each image read back module by module gives the matrix, with
// only light outside it, and the quiet zone is at least the margin.
func TestQRImagesMatchModules(t *testing.T) {
	o, err := parseQROptions(qrArgs("size=300&margin=4&ecc=Q"))
	if err != nil {
		t.Fatal(err)
	}
	modules, err := qrModules("https://sho.rt/Ab3dE9x", o)
	if err != nil {
		t.Fatal(err)
	}
	n := len(modules)
	// The URL is 22 bytes (byte mode: lower case). At level Q version 2
	// holds 20 bytes and version 3 holds 32, so version 3: 17+4*3 = 29
	// modules (ISO/IEC 18004, table 7).
	if n != 29 {
		t.Fatalf("matrix is %d modules wide; want 29 (version 3)", n)
	}
	l, err := layoutQR(modules, o)
	if err != nil {
		t.Fatal(err)
	}
	// 300 px over 29 + 2*4 = 37 modules: 8 px a module (296 px), the
	// code's 232 px centred: offset (300-232)/2 = 34.
	if l.scale != 8 || l.offset != 34 {
		t.Fatalf("layout %+v; want scale 8, offset 34", l)
	}

	b, err := renderQRPNG(modules, o)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != 300 || img.Bounds().Dy() != 300 {
		t.Fatalf("png is %v; want 300x300", img.Bounds())
	}
	dark := func(x, y int) bool { r, _, _, _ := img.At(x, y).RGBA(); return r < 0x8000 }
	for y := 0; y < 300; y++ {
		for x := 0; x < 300; x++ {
			mx, my := (x-l.offset)/l.scale, (y-l.offset)/l.scale
			inside := x >= l.offset && y >= l.offset && mx < n && my < n
			want := inside && modules[my][mx]
			if dark(x, y) != want {
				t.Fatalf("png pixel (%d,%d) dark=%v; want %v", x, y, dark(x, y), want)
			}
		}
	}

	svg, err := renderQRSVG(modules, o)
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]bool, n)
	for i := range got {
		got[i] = make([]bool, n)
	}
	runs := regexp.MustCompile(`M(\d+) (\d+)h(\d+)v(\d+)h-(\d+)z`).FindAllSubmatch(svg, -1)
	if len(runs) == 0 {
		t.Fatalf("svg has no runs: %.200s", svg)
	}
	for _, r := range runs {
		x0, y0, w := atoi(t, r[1]), atoi(t, r[2]), atoi(t, r[3])
		if atoi(t, r[4]) != l.scale || (x0-l.offset)%l.scale != 0 || (y0-l.offset)%l.scale != 0 || w%l.scale != 0 {
			t.Fatalf("svg run %s is not on the module grid", r[0])
		}
		for x := (x0 - l.offset) / l.scale; x < (x0-l.offset+w)/l.scale; x++ {
			got[(y0-l.offset)/l.scale][x] = true
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(modules) {
		t.Fatal("svg modules differ from the matrix")
	}
	if !bytes.Contains(svg, []byte(`width="300" height="300"`)) {
		t.Fatalf("svg size: %.120s", svg)
	}

	if _, err := layoutQR(modules, qrOptions{size: 36, margin: 4}); err == nil {
		t.Fatal("36 px for 37 modules: want an error")
	}
}

func atoi(t *testing.T, b []byte) int {
	n, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// FuzzParseQROptions: any query either fails or gives options within the
// documented bounds, and those options always render.
func FuzzParseQROptions(f *testing.F) {
	for _, s := range []string{"", "format=svg&size=64&margin=0&ecc=h", "size=2048&margin=16", "ecc=%00", "size=-0", "format=png&format=svg"} {
		f.Add(s)
	}
	modules, err := qrModules("https://sho.rt/Ab3dE9x", qrOptions{ecc: qrLevels["H"]})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		o, err := parseQROptions(qrArgs(q))
		if err != nil {
			return
		}
		if o.size < qrMinSize || o.size > qrMaxSize || o.margin < 0 || o.margin > qrMaxMargin || o.ecc == nil {
			t.Fatalf("%q: options out of bounds: %+v", q, o)
		}
		if o.size > 256 { // keep each fuzz run quick; layout is what varies
			o.size = 256
		}
		if _, err := layoutQR(modules, o); err != nil {
			return
		}
		if _, err := renderQRSVG(modules, o); err != nil {
			t.Fatal(err)
		}
	})
}
