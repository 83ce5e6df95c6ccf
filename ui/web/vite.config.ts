import { defineConfig } from "vite";

// The output is committed and embedded in the Go binary: fixed file names (no content hashes)
// keep a rebuild's diff to the files that changed, and no source maps keep it small.
export default defineConfig({
  base: "./",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    modulePreload: { polyfill: false },
    rolldownOptions: {
      output: {
        entryFileNames: "assets/[name].js",
        chunkFileNames: "assets/[name].js",
        assetFileNames: "assets/[name][extname]",
      },
    },
  },
  server: {
    // `npm run dev` against a running `tabbyctl ui`.
    proxy: { "/api": "http://127.0.0.1:8080" },
  },
});
