//! The snapshot renderer and the GPU tests open a wgpu device (lavapipe here), which wants a
//! private XDG_RUNTIME_DIR: one per test binary, set before any thread reads the environment.

pub fn xdg() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        let dir = std::env::temp_dir().join(format!("oomlab-tests-xdg-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        // SAFETY: set before any thread of this test binary reads the environment.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", &dir) };
    }
}
