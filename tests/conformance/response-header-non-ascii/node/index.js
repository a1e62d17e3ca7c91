exports.handler = async () => ({ statusCode: 200, headers: { 'X-Name': 'café ✓' }, body: 'ok' });
