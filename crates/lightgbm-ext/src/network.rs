//! LightGBM's own socket network, for data-parallel training across
//! processes or machines (`tree_learner = data`).
//!
//! Every process holds a disjoint shard of the rows and runs the same
//! training with the same parameters. LightGBM then:
//! * builds one set of bin boundaries: each machine bins a share of the
//!   features from its own sample and the mappers are all-gathered, so
//!   every machine bins its rows the same way;
//! * for every tree level, reduce-scatters the per-feature gradient
//!   histograms (about `features × bins × 2 × 8` bytes per leaf being
//!   split), finds the best split on the global histograms and
//!   all-gathers it, so every machine grows the same tree.
//!
//! The safe `lightgbm3` API has no call to join that network; this module
//! makes the two C calls it needs (`LGBM_NetworkInit`, `LGBM_NetworkFree`)
//! through [`crate::ffi`]. LightGBM keeps
//! the network in thread-local state, so a [`Network`] is neither `Send`
//! nor `Sync`: the dataset must be built, and the booster trained, on the
//! thread that joined.

use std::cell::Cell;
use std::marker::PhantomData;

use crate::Error;

use crate::ffi;

/// One machine of the network: `host:port`, the port it listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Host name or IP address, as the other machines reach it.
    pub host: String,
    /// TCP port its LightGBM listens on.
    pub port: u16,
}

impl std::fmt::Display for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Parses `host:port,host:port,…`.
///
/// # Errors
/// [`Error::Invalid`] naming the entry at fault.
pub fn parse_machines(list: &str) -> Result<Vec<Machine>, Error> {
    let bad = |m: String| Err(Error::Invalid(m));
    let mut out: Vec<Machine> = Vec::new();
    for entry in list.split(',').map(str::trim) {
        let Some((host, port)) = entry.rsplit_once(':') else {
            return bad(format!("machine {entry:?} is not host:port"));
        };
        let Ok(port) = port.parse::<u16>() else {
            return bad(format!("machine {entry:?} has no port in 1..=65535"));
        };
        if host.is_empty() || port == 0 || host.contains(char::is_whitespace) {
            return bad(format!("machine {entry:?} is not host:port"));
        }
        let m = Machine {
            host: host.to_string(),
            port,
        };
        if out.contains(&m) {
            return bad(format!("machine {m} is listed twice"));
        }
        out.push(m);
    }
    if out.len() < 2 {
        return bad("data-parallel training needs at least two machines".into());
    }
    Ok(out)
}

/// A parsed `host:port,…` list (see [`parse_machines`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineList(pub Vec<Machine>);

impl std::str::FromStr for MachineList {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        parse_machines(s).map(MachineList)
    }
}

/// Longest time out LightGBM takes: it counts in milliseconds in an
/// `int`, so 35 792 minutes and more would overflow (one day here).
pub const MAX_TIMEOUT_MINUTES: u32 = 24 * 60;

/// Refuses a host that does not resolve, and two entries that name the
/// same address and port (`localhost:P` and `127.0.0.1:P`): LightGBM
/// would wait for a machine that never comes, then abort.
fn check_distinct(machines: &[Machine]) -> Result<(), Error> {
    use std::net::ToSocketAddrs as _;
    let mut seen: Vec<(std::net::SocketAddr, &Machine)> = Vec::new();
    for m in machines {
        let addrs = (m.host.as_str(), m.port)
            .to_socket_addrs()
            .map_err(|e| Error::Invalid(format!("machine {m}: {e}")))?;
        for a in addrs {
            if let Some((_, other)) = seen.iter().find(|(b, _)| *b == a) {
                return Err(Error::Invalid(format!(
                    "machines {other} and {m} are the same address ({a}): list each machine once"
                )));
            }
            seen.push((a, m));
        }
    }
    Ok(())
}

thread_local! {
    static JOINED: Cell<bool> = const { Cell::new(false) };
}

/// Membership of LightGBM's network on this thread; leaving it (drop)
/// frees LightGBM's sockets.
#[derive(Debug)]
pub struct Network {
    machines: usize,
    rank: usize,
    _thread_bound: PhantomData<*const ()>,
}

impl Network {
    /// Joins the network of `machines` as `machines[rank]`: listens on its
    /// port and connects to every other machine, waiting up to
    /// `timeout_minutes` for them (LightGBM's `time_out`).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a rank outside the list, fewer than two
    /// machines, a zero time out, or a thread already in a network;
    /// [`Error::LightGbm`] when LightGBM cannot join.
    pub fn join(machines: &[Machine], rank: usize, timeout_minutes: u32) -> Result<Self, Error> {
        if machines.len() < 2 {
            return Err(Error::Invalid(
                "data-parallel training needs at least two machines".into(),
            ));
        }
        let Some(me) = machines.get(rank) else {
            return Err(Error::Invalid(format!(
                "rank {rank} is not in 0..{} (one rank per machine listed)",
                machines.len()
            )));
        };
        if !(1..=MAX_TIMEOUT_MINUTES).contains(&timeout_minutes) {
            return Err(Error::Invalid(format!(
                "the network time out must be 1..={MAX_TIMEOUT_MINUTES} minutes, got {timeout_minutes}"
            )));
        }
        check_distinct(machines)?;
        if JOINED.with(Cell::get) {
            return Err(Error::Invalid(
                "this thread is already in a LightGBM network".into(),
            ));
        }
        let list = machines
            .iter()
            .map(Machine::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let count = i32::try_from(machines.len())
            .map_err(|_| Error::Invalid("too many machines".into()))?;
        let timeout = i32::try_from(timeout_minutes).unwrap_or(i32::MAX);
        ffi::network_init(&list, i32::from(me.port), timeout, count)?;
        JOINED.with(|j| j.set(true));
        Ok(Network {
            machines: machines.len(),
            rank,
            _thread_bound: PhantomData,
        })
    }

    /// Machines in the network.
    pub fn machines(&self) -> usize {
        self.machines
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        ffi::network_free();
        JOINED.with(|j| j.set(false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_lists_parse_and_nonsense_is_refused() {
        let m = parse_machines("127.0.0.1:12400, 10.0.0.2:12401").unwrap();
        assert_eq!(m[1].to_string(), "10.0.0.2:12401");
        for bad in [
            "",
            "127.0.0.1:1",
            "a:1,a:1",
            "a,b",
            "a:0,b:1",
            "a:70000,b:1",
            ":1,b:2",
        ] {
            assert!(parse_machines(bad).is_err(), "{bad:?}");
        }
        let e = Network::join(&m, 2, 1).unwrap_err().to_string();
        assert!(e.contains("rank 2 is not in 0..2"), "{e}");
        assert!(Network::join(&m, 0, 0).is_err());
        let e = Network::join(&m, 0, 35_792).unwrap_err().to_string();
        assert!(e.contains("1..=1440"), "{e}");
        let same = parse_machines("localhost:12400,127.0.0.1:12400").unwrap();
        let e = Network::join(&same, 0, 1).unwrap_err().to_string();
        assert!(e.contains("are the same address"), "{e}");
        let nowhere = parse_machines("nonexistent.invalid:12400,127.0.0.1:12401").unwrap();
        let e = Network::join(&nowhere, 1, 1).unwrap_err().to_string();
        assert!(e.contains("nonexistent.invalid:12400"), "{e}");
    }
}
