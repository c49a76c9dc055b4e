//! A value built in the background (pipelines, an executor), looked at again each frame.

use crate::backend::BackendError;

/// Something built asynchronously (pipelines, an executor): in the browser nothing may block a
/// frame, so it is spawned and looked at again each frame.
pub enum Slot<T> {
    Empty,
    Building(futures_channel::oneshot::Receiver<Result<T, BackendError>>),
    Ready(T),
}

impl<T: 'static> Slot<T> {
    /// Starts building: spawned on the browser's event loop on the web; on native, run here
    /// (the device is local and the futures complete without waiting on a frame).
    pub fn spawn(fut: impl std::future::Future<Output = Result<T, BackendError>> + 'static) -> Self {
        let (tx, rx) = futures_channel::oneshot::channel();
        #[cfg(target_arch = "wasm32")]
        wasm_bindgen_futures::spawn_local(async move {
            let _ = tx.send(fut.await);
        });
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = tx.send(pollster::block_on(fut));
        }
        Slot::Building(rx)
    }

    /// The value once built (None while building or empty); an error if building failed.
    pub fn poll(&mut self) -> Result<Option<&mut T>, BackendError> {
        if let Slot::Building(rx) = self {
            match rx.try_recv() {
                Ok(Some(Ok(v))) => *self = Slot::Ready(v),
                Ok(Some(Err(e))) => {
                    *self = Slot::Empty;
                    return Err(e);
                }
                Ok(None) => return Ok(None),
                Err(_) => {
                    *self = Slot::Empty;
                    return Err(BackendError::Cancelled);
                }
            }
        }
        Ok(match self {
            Slot::Ready(v) => Some(v),
            _ => None,
        })
    }
}
