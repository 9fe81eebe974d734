package main

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// writeChart draws the produce rate, the consume rate and the backlog.
func writeChart(path string, s Summary, cfg Config) error {
	p := plot.New()
	p.Title.Text = "Sluice peak shaving: a 10x burst absorbed and drained"
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "messages (rates in msgs/s)"
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
	for _, l := range []struct {
		name string
		xy   plotter.XYs
		c    color.RGBA
	}{
		{"produce rate", prod, color.RGBA{R: 220, G: 60, B: 40, A: 255}},
		{"consume rate", cons, color.RGBA{R: 30, G: 120, B: 200, A: 255}},
		{"backlog", backlog, color.RGBA{R: 40, G: 160, B: 60, A: 255}},
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
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p.Save(9*vg.Inch, 4.5*vg.Inch, path)
}
