// Offline copies of the app (web/sw.js, copied to the top of the site by the build). A file of
// its own rather than an inline script, which the class server's Content-Security-Policy refuses.
if ("serviceWorker" in navigator && location.protocol.startsWith("http")) {
  navigator.serviceWorker.register("./sw.js").catch((e) => console.warn("oomlab: no service worker:", e));
}
