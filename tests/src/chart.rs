//! Time-series charts as PNG or SVG files (by the path's extension):
//! stacked panels of lines over a shared time axis, drawn by plotters. A
//! pure function from samples to a file, so the demo and the benchmark
//! drivers draw their results the same way.
//!
//! Text is drawn with `ab_glyph` from a TrueType font file (no fontconfig or
//! freetype): `$SLUICE_CHART_FONT`, else [`DEFAULT_FONT`] (Debian's
//! `fonts-dejavu-core`).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The font used unless `$SLUICE_CHART_FONT` names another one.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Font family name the charts ask plotters for.
const FAMILY: &str = "sans-serif";

/// One line of a panel: `(x, y)` points, x in seconds.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (configured rates and limits, as opposed to observations).
    pub dashed: bool,
    /// Index into the palette; series that belong together share a colour.
    pub color: usize,
    /// Drawn with a thin line (a part of another series of the same colour).
    pub thin: bool,
}

impl Series {
    /// An observation: a solid line.
    pub fn solid(label: String, points: Vec<(f64, f64)>, color: usize) -> Self {
        Series {
            label,
            points,
            dashed: false,
            color,
            thin: false,
        }
    }

    /// A configured rate or limit: a dashed line.
    pub fn dashed(label: String, points: Vec<(f64, f64)>, color: usize) -> Self {
        Series {
            dashed: true,
            ..Series::solid(label, points, color)
        }
    }

    /// The same, drawn thin.
    pub fn thin(self) -> Self {
        Series { thin: true, ..self }
    }
}

/// One chart area with its own y axis.
#[derive(Clone, Debug, Default)]
pub struct Panel {
    pub title: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// A whole picture: panels stacked top to bottom, sharing the x axis.
#[derive(Clone, Debug)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    /// Picture size in pixels.
    pub width: u32,
    pub height: u32,
    pub panels: Vec<Panel>,
}

#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("cannot read the chart font {path}: {source} (install fonts-dejavu-core or set SLUICE_CHART_FONT)")]
    FontFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is not a usable TrueType/OpenType font")]
    InvalidFont(PathBuf),
    #[error("a chart needs at least one panel and a non-zero size")]
    Empty,
    #[error("drawing the chart failed: {0}")]
    Draw(String),
}

/// Colours that stay apart on white.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The palette colour `index` (wrapping).
pub fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// The font file the charts use.
pub fn font_path() -> PathBuf {
    std::env::var_os("SLUICE_CHART_FONT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_FONT))
}

/// Load and register the font once per process.
fn ensure_font() -> Result<(), ChartError> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    let path = font_path();
    let outcome = LOADED.get_or_init(|| {
        let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
        // plotters keeps fonts for the life of the process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
            .map_err(|_| format!("invalid font: {}", path.display()))
    });
    match outcome {
        Ok(()) => Ok(()),
        Err(message) if message.starts_with("invalid font") => Err(ChartError::InvalidFont(path)),
        Err(message) => Err(ChartError::FontFile {
            path,
            source: std::io::Error::other(message.clone()),
        }),
    }
}

fn draw_error<E: std::fmt::Display>(error: E) -> ChartError {
    ChartError::Draw(error.to_string())
}

/// Render `chart` to `path`: SVG when it ends in `.svg`, PNG otherwise.
pub fn render(chart: &Chart, path: &Path) -> Result<(), ChartError> {
    if chart.panels.is_empty() || chart.width == 0 || chart.height == 0 {
        return Err(ChartError::Empty);
    }
    ensure_font()?;
    let size = (chart.width, chart.height);
    if path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("svg"))
    {
        draw(chart, SVGBackend::new(path, size).into_drawing_area())
    } else {
        draw(chart, BitMapBackend::new(path, size).into_drawing_area())
    }
}

fn draw<DB: DrawingBackend>(chart: &Chart, root: DrawingArea<DB, Shift>) -> Result<(), ChartError>
where
    DB::ErrorType: 'static,
{
    let x_max = chart
        .panels
        .iter()
        .flat_map(|p| p.series.iter())
        .flat_map(|s| s.points.iter().map(|&(x, _)| x))
        .filter(|x| x.is_finite())
        .fold(1.0_f64, f64::max);

    root.fill(&WHITE).map_err(draw_error)?;
    let root = root
        .titled(&chart.title, (FAMILY, 24).into_font())
        .map_err(draw_error)?;
    let areas = root.split_evenly((chart.panels.len(), 1));
    for (panel, area) in chart.panels.iter().zip(areas.iter()) {
        let y_max = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|&(_, y)| y))
            .filter(|y| y.is_finite())
            .fold(0.0_f64, f64::max);
        // Head room for the legend.
        let y_top = if y_max > 0.0 { y_max * 1.35 } else { 1.0 };
        let mut ctx = ChartBuilder::on(area)
            .caption(&panel.title, (FAMILY, 17).into_font())
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..x_max, 0.0..y_top)
            .map_err(draw_error)?;
        ctx.configure_mesh()
            .x_desc(chart.x_label.as_str())
            .y_desc(panel.y_label.as_str())
            .label_style((FAMILY, 13).into_font())
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(225, 225, 225))
            .draw()
            .map_err(draw_error)?;
        for series in &panel.series {
            let colour = color(series.color);
            let points = series
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite());
            let width = if series.thin { 1 } else { 2 };
            let legend_style = colour.stroke_width(width);
            let drawn = if series.dashed {
                ctx.draw_series(DashedLineSeries::new(
                    points,
                    8,
                    5,
                    colour.stroke_width(width),
                ))
                .map_err(draw_error)?
            } else {
                ctx.draw_series(LineSeries::new(points, colour.stroke_width(width)))
                    .map_err(draw_error)?
            };
            let dashed = series.dashed;
            drawn.label(series.label.as_str()).legend(move |(x, y)| {
                if dashed {
                    PathElement::new(vec![(x, y), (x + 7, y)], legend_style)
                } else {
                    PathElement::new(vec![(x, y), (x + 18, y)], legend_style)
                }
            });
        }
        if panel.series.iter().any(|s| !s.label.is_empty()) {
            ctx.configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(180, 180, 180))
                .label_font((FAMILY, 13).into_font())
                .draw()
                .map_err(draw_error)?;
        }
    }
    root.present().map_err(draw_error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn png_size(bytes: &[u8]) -> (u32, u32) {
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        assert_eq!(&bytes[12..16], b"IHDR", "first chunk is IHDR");
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        (w, h)
    }

    #[test]
    fn renders_a_small_chart_to_a_valid_png_of_the_asked_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.png");
        let chart = Chart {
            title: "test chart".into(),
            x_label: "seconds".into(),
            width: 480,
            height: 360,
            panels: vec![
                Panel {
                    title: "requests/s".into(),
                    y_label: "req/s".into(),
                    series: vec![
                        Series {
                            label: "observed".into(),
                            points: (0..30).map(|i| (i as f64, (i % 7) as f64)).collect(),
                            dashed: false,
                            color: 0,
                            thin: false,
                        },
                        Series {
                            label: "configured".into(),
                            points: vec![(0.0, 4.0), (15.0, 4.0), (15.0, 2.0), (30.0, 2.0)],
                            dashed: true,
                            color: 1,
                            thin: true,
                        },
                    ],
                },
                Panel {
                    title: "empty panel".into(),
                    y_label: "s".into(),
                    series: vec![],
                },
            ],
        };
        render(&chart, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(png_size(&bytes), (480, 360));
        // Not a blank picture: lines and text make it compress worse than
        // a white field would.
        assert!(bytes.len() > 2_000, "{} bytes", bytes.len());
        // The trailing IEND chunk marks a complete file.
        assert_eq!(&bytes[bytes.len() - 8..bytes.len() - 4], b"IEND");
    }

    #[test]
    fn an_empty_chart_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let chart = Chart {
            title: String::new(),
            x_label: String::new(),
            width: 100,
            height: 100,
            panels: vec![],
        };
        assert!(matches!(
            render(&chart, &dir.path().join("x.png")),
            Err(ChartError::Empty)
        ));
    }

    #[test]
    fn an_svg_path_gets_an_svg_with_each_line_in_its_colour() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.svg");
        let line =
            |label: &str, color| Series::solid(label.into(), vec![(0.0, 1.0), (5.0, 2.0)], color);
        let chart = Chart {
            title: "t".into(),
            x_label: "s".into(),
            width: 400,
            height: 300,
            panels: vec![Panel {
                title: "RSS".into(),
                y_label: "MiB".into(),
                series: vec![line("a", 0), line("b", 1)],
            }],
        };
        render(&chart, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        // plotters writes a text's content on a line of its own.
        assert!(svg.lines().any(|line| line.trim() == "RSS"), "{svg}");
        // Each line in its palette colour, once in the panel and once in the legend.
        for colour in ["#1F77B4", "#D62728"] {
            let stroke = format!("stroke=\"{colour}\"");
            assert_eq!(svg.matches(&stroke).count(), 2, "{colour}: {svg}");
        }
    }
}
