// Loaded before the vendored Redoc bundle, which always renders its logo from
// https://cdn.redoc.ly (no option hides it): the image is pointed at our own icon instead,
// whichever way the bundle sets its source (attribute or property).
(() => {
  const logo = document.currentScript.dataset.logo;
  const local = (value) => (String(value).startsWith("https://cdn.redoc.ly/") ? logo : value);
  const setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    return setAttribute.call(this, name, this.tagName === "IMG" && name === "src" ? local(value) : value);
  };
  const src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, "src");
  Object.defineProperty(HTMLImageElement.prototype, "src", {
    ...src,
    set(value) { src.set.call(this, local(value)); },
  });
})();
