const topLevel = await Promise.resolve('awaited');

export const handler = async () => ({
  format: 'esm',
  noRequire: typeof require === 'undefined',
  topLevel,
});
