exports.handler = async () => {
  console.log('to-stdout-marker');
  console.error('to-stderr-marker');
  console.warn('console-warn-marker');
  console.info('console-info-marker');
  process.stderr.write('process-stderr-marker\n');
  return 'ok';
};
