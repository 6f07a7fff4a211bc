//! The endpoints, one file per resource: score (with its answer body and
//! the debug view), telemetry, feedback, the view stream, workers, the model (and
//! promotion), admin (reload, the config view, the config canary and worker overrides), and operations. Who may
//! call each is `http::auth`.

pub mod answer;
pub mod canary;
pub mod explain;
pub mod feedback;
pub mod model;
pub mod model_files;
pub mod operations;
pub mod overrides;
pub mod promote;
pub mod reconfigure;
pub mod router_decisions;
pub mod router_load;
pub mod score;
pub mod telemetry;
pub mod view;
pub mod workers;
