//! The only C calls into LightGBM outside the safe `lightgbm3` API.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};

use crate::NetworkError;

/// LightGBM's message for the last failed call on this thread.
fn last_error() -> String {
    // SAFETY: LGBM_GetLastError takes no arguments and returns a pointer to
    // LightGBM's thread-local, NUL-terminated error buffer, which lives for
    // the thread and is only rewritten by a later failing call on this
    // thread; it is copied out before any other call.
    let p = unsafe { lightgbm3_sys::LGBM_GetLastError() };
    if p.is_null() {
        return "unknown error".to_string();
    }
    // SAFETY: `p` is non-null and NUL-terminated (above).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `LGBM_NetworkInit(machines, local_listen_port, time_out, num_machines)`.
pub(crate) fn network_init(
    machines: &str,
    local_listen_port: i32,
    timeout_minutes: i32,
    num_machines: i32,
) -> Result<(), NetworkError> {
    let list = CString::new(machines)
        .map_err(|_| NetworkError::Invalid("a machine name holds a NUL byte".into()))?;
    // SAFETY: `list` is a valid NUL-terminated string that outlives the
    // call (LightGBM copies it into its config); the integers are plain
    // values. LightGBM catches its own exceptions at the C boundary and
    // returns non-zero on failure.
    let rc = unsafe {
        lightgbm3_sys::LGBM_NetworkInit(
            list.as_ptr(),
            local_listen_port,
            timeout_minutes,
            num_machines,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(NetworkError::LightGbm(last_error()))
    }
}

/// `LGBM_NetworkFree()`: closes this thread's LightGBM sockets.
pub(crate) fn network_free() {
    // SAFETY: no arguments; disposing of a network that was never joined,
    // or already freed, is a no-op in LightGBM (`Network::Dispose` resets
    // its thread-local state).
    let _ = unsafe { lightgbm3_sys::LGBM_NetworkFree() };
}
