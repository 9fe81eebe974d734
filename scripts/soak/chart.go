package main

import (
	"bytes"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writeChart draws four panels over one time axis (minutes): memory
// (resident and heap, MiB), goroutines, open descriptors, and the send
// latency percentiles (ms) of each period.
func writeChart(path string, samples []Sample) error {
	type line struct {
		name string
		y    func(Sample) float64
		c    color.RGBA
	}
	red, blue, green := color.RGBA{R: 220, G: 60, B: 40, A: 255}, color.RGBA{R: 30, G: 120, B: 200, A: 255},
		color.RGBA{R: 40, G: 160, B: 60, A: 255}
	panels := []struct {
		title, unit string
		lines       []line
	}{
		{"Sluice soak: the broker's resources and send latency", "MiB", []line{
			{"resident", func(s Sample) float64 { return s.RSS / (1 << 20) }, red},
			{"heap in use", func(s Sample) float64 { return s.Heap / (1 << 20) }, blue}}},
		{"", "goroutines", []line{{"goroutines", func(s Sample) float64 { return s.Goroutines }, green}}},
		{"", "open descriptors", []line{{"descriptors", func(s Sample) float64 { return s.FDs }, blue}}},
		{"", "send latency (ms)", []line{
			{"p50", func(s Sample) float64 { return s.P50 }, green},
			{"p99", func(s Sample) float64 { return s.P99 }, blue},
			{"p99.9", func(s Sample) float64 { return s.P999 }, red}}},
	}
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.Y.Label.Text = pn.unit
		p.Y.Min = 0
		p.X.Min, p.X.Max = 0, samples[len(samples)-1].At.Minutes()
		p.X.Tick.Marker = minuteTicks{}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		if i == len(panels)-1 {
			p.X.Label.Text = "minutes since sending started"
		}
		for _, l := range pn.lines {
			xy := make(plotter.XYs, len(samples))
			for j, s := range samples {
				xy[j] = plotter.XY{X: s.At.Minutes(), Y: l.y(s)}
			}
			ln, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			ln.Color, ln.Width = l.c, vg.Points(1.5)
			p.Add(ln)
			p.Legend.Add(l.name, ln)
		}
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.New(9*vg.Inch, 10*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	var png bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&png); err != nil {
		return err
	}
	return os.WriteFile(path, png.Bytes(), 0o644)
}

// minuteTicks labels round minutes: every 0.5, 1, 2, 5, 10, 15, 30, 60,
// 120 or 240, the first step that gives at most 8 steps.
type minuteTicks struct{}

func (minuteTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 480.0
	for _, s := range []float64{0.5, 1, 2, 5, 10, 15, 30, 60, 120, 240} {
		if (hi-lo)/s <= 8 {
			step = s
			break
		}
	}
	var ticks []plot.Tick
	for m := math.Ceil(lo/step) * step; m <= hi; m += step {
		ticks = append(ticks, plot.Tick{Value: m, Label: strconv.FormatFloat(m, 'f', -1, 64)})
	}
	return ticks
}
