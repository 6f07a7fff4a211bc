//! The testbed's service runs as it would off loopback: the agent, router
//! and admin roles each have a token, fresh per run, and the testbed's
//! router and agent send theirs, so the service arms pay for the check as
//! a deployment does.

use scorer_client::Credentials;
use scorer_engine::config::Config;

/// The router token's name, which is also the embedded arm's router id
/// (the service binds a router's id to its credential).
pub const ROUTER_NAME: &str = "testbed-router";

/// Bytes of randomness per token (hex: twice as many characters).
const TOKEN_BYTES: usize = 24;

fn token() -> String {
    let bytes: [u8; TOKEN_BYTES] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One run's tokens, as the clients send them.
pub struct RunCredentials {
    /// What the telemetry agent sends.
    pub agent: Credentials,
    /// What the testbed's router sends with its score and feedback calls.
    pub router: Credentials,
    /// What the testbed's operator sends (the `drain` scenario's override).
    pub admin: Credentials,
}

impl RunCredentials {
    /// Fresh tokens, put in `config`'s `[auth]`.
    ///
    /// # Errors
    /// A token the client library refuses (never, for hex).
    pub fn install(config: &mut Config) -> Result<Self, String> {
        let (agent, router, admin) = (token(), token(), token());
        config
            .auth
            .agent
            .insert("testbed-agent".into(), agent.clone());
        config
            .auth
            .router
            .insert(ROUTER_NAME.into(), router.clone());
        config.auth.admin.insert("testbed".into(), admin.clone());
        let with = |t: &str| Credentials::none().with_token(t).map_err(|e| e.to_string());
        Ok(Self {
            agent: with(&agent)?,
            router: with(&router)?,
            admin: with(&admin)?,
        })
    }

    /// A fresh token for one more router, named `id` in `config`'s
    /// `[auth.router]`: with several routers each reports its load under
    /// its own id, which the service binds to its credential.
    ///
    /// # Errors
    /// A token the client library refuses (never, for hex).
    pub fn add_router(config: &mut Config, id: &str) -> Result<Credentials, String> {
        let t = token();
        config.auth.router.insert(id.into(), t.clone());
        Credentials::none()
            .with_token(&t)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_writing_role_gets_a_distinct_valid_token() {
        let mut c = Config::default();
        let creds = RunCredentials::install(&mut c).unwrap();
        assert!(creds.agent.has_token() && creds.router.has_token());
        assert!(c.validate().is_ok());
        let a = &c.auth.agent["testbed-agent"];
        // The embedded arm reports as its token's name, as the service requires.
        let r = &c.auth.router[ROUTER_NAME];
        assert_ne!(a, r);
        assert_eq!(a.len(), 2 * TOKEN_BYTES);
        // Off loopback every writing role has a credential (the reader
        // role, which has none, runs on loopback here).
        let far: std::net::SocketAddr = "10.0.0.1:8080".parse().unwrap();
        assert!(
            scorer_engine::config::auth::check_exposure(far, &c.auth, None, false, false).is_ok()
        );
        let other = RunCredentials::add_router(&mut c, "testbed-router-1").unwrap();
        assert!(other.has_token());
        assert_ne!(
            c.auth.router["testbed-router-1"],
            c.auth.router[ROUTER_NAME]
        );
        assert!(c.validate().is_ok());
    }
}
