//! Loading the configuration: embedded defaults, an optional TOML file,
//! then environment overrides `SCORER_<SECTION>__<KEY>`, through figment.
//!
//! The configuration's types, ranges and hash are
//! [`scorer_engine::config`]; an invalid config stops start-up with a
//! message naming the key and where it came from.

use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use scorer_engine::config::{Config, ConfigError, ENV_PREFIX};

#[path = "config_error.rs"]
mod describe;

/// [`Config`] loaded through figment.
pub trait LoadConfig: Sized {
    /// Embedded defaults, then `path` (TOML) when given, then `SCORER_*` environment overrides.
    ///
    /// # Errors
    /// [`ConfigError::Load`] when the file is unreadable, a key is unknown or has the
    /// wrong type (the message names it); [`ConfigError::Invalid`] when a value is
    /// out of range.
    fn load(path: Option<&Path>) -> Result<Self, ConfigError>;

    /// Like [`LoadConfig::load`] with an explicit environment provider (tests use
    /// `Env::prefixed(..)` over a jail or pass an empty one).
    ///
    /// # Errors
    /// As [`LoadConfig::load`].
    fn load_from(path: Option<&Path>, env: Env) -> Result<Self, ConfigError>;

    /// Parse a TOML document over the defaults (no environment).
    ///
    /// # Errors
    /// As [`LoadConfig::load`].
    fn from_toml_str(toml: &str) -> Result<Self, ConfigError>;
}

impl LoadConfig for Config {
    fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_from(path, Env::prefixed(ENV_PREFIX).split("__"))
    }

    fn load_from(path: Option<&Path>, env: Env) -> Result<Self, ConfigError> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        if let Some(path) = path {
            fig = fig.merge(Toml::file_exact(path));
        }
        let cfg: Config = fig
            .merge(env)
            .extract()
            .map_err(|e| ConfigError::Load(describe::describe(e)))?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn from_toml_str(toml: &str) -> Result<Self, ConfigError> {
        let cfg: Config = Figment::from(Serialized::defaults(Config::default()))
            .merge(Toml::string(toml))
            .extract()
            .map_err(|e| ConfigError::Load(describe::describe(e)))?;
        cfg.validate()?;
        Ok(cfg)
    }
}

#[cfg(test)]
#[path = "config_load_tests.rs"]
mod tests;
