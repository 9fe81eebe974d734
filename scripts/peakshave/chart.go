package main

import (
	"fmt"
	"image/color"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writeChart draws two panels over one time axis: the produce and consume
// rates (msgs/s) above, the backlog (messages) below. On one axis the
// backlog (thousands of messages) flattened the consume rate (hundreds of
// msgs/s) to a line near zero.
func writeChart(path string, s Summary) error {
	var prod, cons, backlog plotter.XYs
	var prev Sample
	for i, smp := range s.Samples {
		x := smp.At.Seconds()
		if i > 0 {
			dt := (smp.At - prev.At).Seconds()
			prod = append(prod, plotter.XY{X: x, Y: float64(smp.Acked-prev.Acked) / dt})
			cons = append(cons, plotter.XY{X: x, Y: float64(smp.Consumed-prev.Consumed) / dt})
		}
		backlog = append(backlog, plotter.XY{X: x, Y: float64(smp.Acked - smp.Consumed)})
		prev = smp
	}
	rates, held := plot.New(), plot.New()
	rates.Title.Text = "Sluice peak shaving: a 10x burst absorbed and drained"
	rates.Y.Label.Text = "msgs/s"
	held.Y.Label.Text = "backlog (messages)"
	held.X.Label.Text = "seconds since the burst started"
	for _, l := range []struct {
		p    *plot.Plot
		name string
		xy   plotter.XYs
		c    color.RGBA
	}{
		{rates, "produce rate", prod, color.RGBA{R: 220, G: 60, B: 40, A: 255}},
		{rates, "consume rate", cons, color.RGBA{R: 30, G: 120, B: 200, A: 255}},
		{held, "backlog", backlog, color.RGBA{R: 40, G: 160, B: 60, A: 255}},
	} {
		if len(l.xy) == 0 {
			continue
		}
		line, err := plotter.NewLine(l.xy)
		if err != nil {
			return err
		}
		line.Color = l.c
		line.Width = vg.Points(1.5)
		l.p.Add(line)
		l.p.Legend.Add(l.name, line)
	}
	end := 0.0
	if len(s.Samples) > 0 {
		end = s.Samples[len(s.Samples)-1].At.Seconds()
	}
	for _, p := range []*plot.Plot{rates, held} {
		p.X.Min, p.X.Max = 0, end
		p.X.Tick.Marker = secondTicks{}
		p.Y.Min = 0
		p.Y.Tick.Marker = wholeTicks{}
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
	}

	img := vgimg.New(9*vg.Inch, 6*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align([][]*plot.Plot{{rates}, {held}}, tiles, dc)
	rates.Draw(canvases[0][0])
	held.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// secondTicks marks whole seconds from 0: labelled every 1, 2, 5, 10, 15,
// 30 or 60 s, whichever gives at most 12 labels, with an unlabelled tick
// each second in between when that leaves at most 120.
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 60
	for _, s := range []int{1, 2, 5, 10, 15, 30} {
		if (hi-lo)/float64(s) <= 12 {
			step = s
			break
		}
	}
	var ticks []plot.Tick
	for sec := 0; float64(sec) <= hi; sec++ {
		switch {
		case float64(sec) < lo:
		case sec%step == 0:
			ticks = append(ticks, plot.Tick{Value: float64(sec), Label: fmt.Sprint(sec)})
		case hi-lo <= 120:
			ticks = append(ticks, plot.Tick{Value: float64(sec)})
		}
	}
	return ticks
}

// wholeTicks are gonum's default ticks labelled without decimals (5000,
// not 5000.00).
type wholeTicks struct{}

func (wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}
