import path from 'node:path';

export const handler = async () => ({
  format: 'esm',
  noRequire: typeof require === 'undefined',
  joined: path.posix.join('a', 'b'),
});
