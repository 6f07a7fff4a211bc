//! A router is its credential: the `router_id` a router names on
//! `/v1/router/load`, `/v1/router/decisions` and in the view stream's
//! `?router_id` must be the name of the credential it presented (a token's
//! name in `[auth.router]`, or its client certificate's name), or, with
//! `auth.router_ids = "prefixed"`, start with that name and a separator.
//! So one router's token cannot overwrite or erase another's load, nor
//! write records and outcomes under another's decision ids (which carry
//! the router id).
//!
//! An admin credential may act for any router. Without a credential (the
//! router role is open) no id is bound.

use axum::http::StatusCode;
use scorer_engine::config::auth::RouterIds;

use crate::http::ApiError;
use crate::http::auth::{Caller, CallerRole, Role};

/// The credential a request to a router route came with, as the auth
/// middleware left it in the request's extensions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RouterCredential<'a> {
    /// The credential's name; `None` when the role is open.
    pub name: Option<&'a str>,
    /// Its role.
    pub role: Option<Role>,
}

impl<'a> RouterCredential<'a> {
    /// From the extensions `auth::require` inserted.
    pub fn of(caller: Option<&'a Caller>, role: Option<&CallerRole>) -> Self {
        Self {
            name: caller.map(|c| &*c.0),
            role: role.map(|r| r.0),
        }
    }

    /// The name `router_id` is bound to, when it is bound: every router
    /// credential's, never an admin's.
    pub fn bound_name(self) -> Option<&'a str> {
        self.name.filter(|_| self.role != Some(Role::Admin))
    }
}

/// `Ok` when `cred` may act as router `router_id` under `mode`; otherwise
/// 403 `router_id_not_yours`, naming both.
pub(crate) fn check_router_id(
    cred: RouterCredential<'_>,
    mode: RouterIds,
    router_id: &str,
) -> Result<(), ApiError> {
    let Some(name) = cred.bound_name() else {
        return Ok(());
    };
    if mode.allows(name, router_id) {
        return Ok(());
    }
    let allowed = match mode {
        RouterIds::Exact => format!("`{name}`"),
        RouterIds::Prefixed => format!("`{name}` or `{name}-…`, `{name}.…`, `{name}_…`"),
    };
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "router_id_not_yours",
        format!(
            "router id `{router_id}` does not belong to the credential `{name}`: it may report as {allowed} (auth.router_ids = \"{}\")",
            mode.as_str()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_router_credential_is_bound_to_its_name_an_admin_and_the_open_role_are_not() {
        let edge2 = Caller(Arc::from("edge-2"));
        let router = RouterCredential::of(Some(&edge2), Some(&CallerRole(Role::Router)));
        assert!(check_router_id(router, RouterIds::Exact, "edge-2").is_ok());
        let e = check_router_id(router, RouterIds::Exact, "edge-1").unwrap_err();
        assert_eq!(
            (e.status, e.code),
            (StatusCode::FORBIDDEN, "router_id_not_yours")
        );
        assert!(e.message.contains("edge-1") && e.message.contains("edge-2"));
        let ops = Caller(Arc::from("ops"));
        let admin = RouterCredential::of(Some(&ops), Some(&CallerRole(Role::Admin)));
        assert!(check_router_id(admin, RouterIds::Exact, "edge-1").is_ok());
        let open = RouterCredential::of(None, None);
        assert!(check_router_id(open, RouterIds::Exact, "edge-1").is_ok());
    }
}
