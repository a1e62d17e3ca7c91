export const handler = async () => ({ format: 'esm', noRequire: typeof require === 'undefined' });
