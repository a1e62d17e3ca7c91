import path from 'node:path';

export const handler = async () => ({
  format: 'esm',
  noRequire: typeof require === 'undefined',
  sep: path.sep,
});
