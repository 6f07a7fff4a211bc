//! The only C calls into LightGBM outside the safe `lightgbm3` API.
//!
//! Every call returns LightGBM's status (0 on success; LightGBM catches its
//! own exceptions at the C boundary), turned here into [`Error::LightGbm`]
//! with LightGBM's message. Handles are owned by RAII guards that free them
//! exactly once.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char};

use crate::Error;

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

fn status(rc: i32) -> Result<(), Error> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::LightGbm(last_error()))
    }
}

fn c_string(s: &str, what: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::Invalid(format!("{what} holds a NUL byte")))
}

/// `LGBM_NetworkInit(machines, local_listen_port, time_out, num_machines)`.
pub(crate) fn network_init(
    machines: &str,
    local_listen_port: i32,
    timeout_minutes: i32,
    num_machines: i32,
) -> Result<(), Error> {
    let list = c_string(machines, "a machine name")?;
    // SAFETY: `list` is a valid NUL-terminated string that outlives the
    // call (LightGBM copies it into its config); the integers are plain
    // values.
    status(unsafe {
        lightgbm3_sys::LGBM_NetworkInit(
            list.as_ptr(),
            local_listen_port,
            timeout_minutes,
            num_machines,
        )
    })
}

/// `LGBM_NetworkFree()`: closes this thread's LightGBM sockets.
pub(crate) fn network_free() {
    // SAFETY: no arguments; disposing of a network that was never joined,
    // or already freed, resets LightGBM's thread-local state and nothing
    // else.
    let _ = unsafe { lightgbm3_sys::LGBM_NetworkFree() };
}

/// A LightGBM dataset handle, freed on drop.
pub(crate) struct DatasetHandle(lightgbm3_sys::DatasetHandle);

impl Drop for DatasetHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful LGBM_DatasetCreateFromFile
        // and is freed only here, once; no booster outlives it (the
        // booster guard is dropped first, see `train_from_file`).
        let _ = unsafe { lightgbm3_sys::LGBM_DatasetFree(self.0) };
    }
}

/// `LGBM_DatasetCreateFromFile(path, parameters, NULL, &out)`.
pub(crate) fn dataset_from_file(path: &str, parameters: &str) -> Result<DatasetHandle, Error> {
    let path = c_string(path, "the data file's path")?;
    let params = c_string(parameters, "a parameter")?;
    let mut out: lightgbm3_sys::DatasetHandle = std::ptr::null_mut();
    // SAFETY: both strings are valid and NUL-terminated for the call; a
    // null reference dataset means "build bins from this file"; `out` is a
    // valid place for the handle, written only on success.
    status(unsafe {
        lightgbm3_sys::LGBM_DatasetCreateFromFile(
            path.as_ptr(),
            params.as_ptr(),
            std::ptr::null_mut(),
            &mut out,
        )
    })?;
    Ok(DatasetHandle(out))
}

/// A LightGBM booster handle, freed on drop.
pub(crate) struct BoosterHandle(lightgbm3_sys::BoosterHandle);

impl Drop for BoosterHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful LGBM_BoosterCreate and
        // is freed only here, once.
        let _ = unsafe { lightgbm3_sys::LGBM_BoosterFree(self.0) };
    }
}

/// `LGBM_BoosterCreate(dataset, parameters, &out)`. The booster reads the
/// dataset while it trains: keep `dataset` alive longer than the booster.
pub(crate) fn booster_create(
    dataset: &DatasetHandle,
    parameters: &str,
) -> Result<BoosterHandle, Error> {
    let params = c_string(parameters, "a parameter")?;
    let mut out: lightgbm3_sys::BoosterHandle = std::ptr::null_mut();
    // SAFETY: `dataset.0` is a live dataset handle (its guard is borrowed);
    // `params` is NUL-terminated for the call; `out` is written on success.
    status(unsafe { lightgbm3_sys::LGBM_BoosterCreate(dataset.0, params.as_ptr(), &mut out) })?;
    Ok(BoosterHandle(out))
}

/// `LGBM_BoosterUpdateOneIter`: one boosting round; true when LightGBM
/// cannot grow further (every leaf at its limit).
pub(crate) fn booster_update_one_iter(booster: &mut BoosterHandle) -> Result<bool, Error> {
    let mut finished: i32 = 0;
    // SAFETY: `booster.0` is a live booster (its guard is borrowed
    // mutably, so no other call runs on it); `finished` is a valid int.
    status(unsafe { lightgbm3_sys::LGBM_BoosterUpdateOneIter(booster.0, &mut finished) })?;
    Ok(finished != 0)
}

/// `LGBM_BoosterSaveModelToString` of every iteration: the `model.txt` text.
pub(crate) fn booster_save_string(booster: &BoosterHandle) -> Result<String, Error> {
    let mut len: i64 = 0;
    // SAFETY: a zero-length buffer with a null pointer asks only for the
    // size, written to `len`.
    status(unsafe {
        lightgbm3_sys::LGBM_BoosterSaveModelToString(
            booster.0,
            0,
            -1,
            0,
            0,
            &mut len,
            std::ptr::null_mut(),
        )
    })?;
    let size = usize::try_from(len).map_err(|_| Error::LightGbm("negative model size".into()))?;
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` holds `size` writable bytes and LightGBM writes at most
    // `buffer_len` = `size` of them (the text and its NUL), `len` again.
    status(unsafe {
        lightgbm3_sys::LGBM_BoosterSaveModelToString(
            booster.0,
            0,
            -1,
            0,
            len,
            &mut len,
            buf.as_mut_ptr().cast::<c_char>(),
        )
    })?;
    let text = CStr::from_bytes_until_nul(&buf)
        .map_err(|_| Error::LightGbm("the model text has no terminating NUL".into()))?;
    Ok(text.to_string_lossy().into_owned())
}
