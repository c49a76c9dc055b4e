// oomlab's service worker: lets a shared link open again without a network (a classroom with a
// flaky connection). Network first — a new deployment is always picked up when the server answers
// — and the cached copy of the same file when the network fails or the server errs (5xx).
// The source lives in web/; the build copies it to the top of dist/ so its scope is the whole app.
// The app puts the Chinese font into this cache itself (src/app/lang.rs, SW_CACHE: keep the two
// equal), since on a first visit this worker may not control the page when the font is fetched.
const CACHE = "oomlab-v1";
const SHELL = ["./", "./index.html", "./oomlab.js", "./oomlab_bg.wasm", "./start.js", "./web/manifest.json",
  "./web/a11y.js", "./web/boot.js", "./web/icon-192.png", "./web/icon-512.png"];

self.addEventListener("install", (event) => {
  // Precache the app shell; a file missing from this build (e.g. under `trunk serve`, whose file
  // names differ) is skipped rather than failing the install.
  event.waitUntil(caches.open(CACHE).then((cache) =>
    Promise.all(SHELL.map((url) => cache.add(url).catch(() => undefined)))));
  self.skipWaiting();
});

self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  const url = new URL(request.url);
  // The class API is never cached: its answers hold students' names, a class's state is only
  // true live, and a live stream never ends (a copy of it would grow forever).
  if (request.method !== "GET" || url.origin !== self.location.origin || url.pathname.startsWith("/api/")) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    try {
      const response = await fetch(request);
      if (response.status < 500) {
        if (response.ok) cache.put(request, response.clone()).catch(() => undefined);
        return response;
      }
      const cached = await cache.match(request, { ignoreSearch: true });
      return cached || response;
    } catch (err) {
      const cached = await cache.match(request, { ignoreSearch: true });
      if (cached) return cached;
      throw err;
    }
  })());
});
